package perf

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// The Gang workload (see workloads in perf_test.go).
const (
	// gangInit is the namespace of the initial gangs, placed before the
	// measured ones.
	gangInit = "gang-init"
	// gangClique is the node label whose values are the domains: the
	// PodGroups' topology constraint and the topology rules' setting.
	gangClique = "nvidia.com/gpu.clique"
	// gangSmall and gangLarge prefix the values of the small (4 nodes) and
	// large (16 nodes) cliques (testdata/node-gang.yaml).
	gangSmall, gangLarge = "small-", "large-"
	// gangGPUs is what each gang takes: 8 pods of one GPU.
	gangGPUs = 8
)

// gangSettings are the topology rules' settings, for the native twin and
// the wasm policy alike (JSON, one line).
const gangSettings = `{"topologyKey": "` + gangClique + `", "resource": "nvidia.com/gpu"}`

// gangRounds names the rounds of measured gangs: r0, r1, ...
func gangRounds(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%d", i)
	}
	return out
}

// gangCounts are a Gang workload's correctness counters, in extra.json.
type gangCounts struct {
	// Gangs are the PodGroups; Placed those with every member bound, all
	// within one clique.
	Gangs  int `json:"gangs"`
	Placed int `json:"placed"`
	// Partial are gangs with some but not all members bound; Split those
	// whose members are bound in more than one clique. Both must be 0.
	Partial int `json:"partial"`
	Split   int `json:"split"`
	// Bindings are the pods seen going from no node to a node;
	// BoundTwice those seen on a node and then on another. Must be 0.
	Bindings   int `json:"bindings"`
	BoundTwice int `json:"boundTwice"`
	// InSmall and InLarge count the placed gangs by the kind of clique.
	InSmall int `json:"inSmall"`
	InLarge int `json:"inLarge"`
	// LargeFree are the large cliques with no pod at the end (each could
	// take a gang of 16 whole nodes); SmallWithRoom the small cliques with
	// room for another gang at the end.
	LargeFree     int `json:"largeFree"`
	SmallWithRoom int `json:"smallWithRoom"`
}

// bindWatch follows the pods of a Gang workload from its start: which
// node each pod was seen on, so that a pod bound twice shows.
type bindWatch struct {
	mu         sync.Mutex
	changed    *sync.Cond
	node       map[types.UID]string
	bindings   int
	boundTwice []string
	err        error
	cancel     context.CancelFunc
	done       chan struct{}
}

// watchBindings starts a bindWatch on every namespace.
func watchBindings(tCtx tContext) *bindWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &bindWatch{node: map[types.UID]string{}, cancel: cancel, done: make(chan struct{})}
	w.changed = sync.NewCond(&w.mu)
	client := tCtx.Client()
	go func() {
		defer close(w.done)
		rv := ""
		for ctx.Err() == nil {
			wi, err := client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				if ctx.Err() == nil {
					w.fail(fmt.Errorf("watch pods: %w", err))
				}
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					if ctx.Err() != nil {
						wi.Stop()
						return
					}
					w.fail(fmt.Errorf("watch pods: %v", ev.Object))
					wi.Stop()
					return
				}
				p, ok := ev.Object.(*v1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					w.seen(p)
				}
			}
		}
	}()
	return w
}

func (w *bindWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	w.changed.Broadcast()
}

// waitFor returns once the watch has seen n bindings, or has failed.
func (w *bindWatch) waitFor(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.bindings < n && w.err == nil {
		w.changed.Wait()
	}
}

func (w *bindWatch) seen(p *v1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch was := w.node[p.UID]; was {
	case p.Spec.NodeName:
	case "":
		w.node[p.UID] = p.Spec.NodeName
		w.bindings++
		w.changed.Broadcast()
	default:
		w.boundTwice = append(w.boundTwice, fmt.Sprintf("%s/%s on %s, then on %s", p.Namespace, p.Name, was, p.Spec.NodeName))
	}
}

// stop ends the watch and returns what it saw.
func (w *bindWatch) stop() (bindings int, boundTwice []string, err error) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bindings, w.boundTwice, w.err
}
