package perf

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

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

// checkGang counts how a Gang workload placed its gangs and fails it if a
// gang is partly bound, split across cliques or not placed at all, if a
// pod was bound twice, or, under a profile running the topology rules, if
// a gang went to a large clique while a small clique still has room for it
// (nothing is deleted, so room only shrinks: a small clique with room now
// had room then). Under default (upstream's built-in placement) the last
// is only counted: it picks among fitting cliques by pod count, a tie.
func checkGang(tCtx tContext, name string, binds *bindWatch) *gangCounts {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &gangCounts{}
	client := tCtx.Client()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		tCtx.Errorf("list nodes: %v", err)
		return nil
	}
	clique := map[string]string{}
	free := map[string]int64{} // GPUs free per clique
	for _, n := range nodes.Items {
		v := n.Labels[gangClique]
		clique[n.Name] = v
		gpus := n.Status.Allocatable[resourceGPU]
		free[v] += gpus.Value()
	}
	bound := 0
	for _, ns := range []string{gangInit, measuredNamespace} {
		groups, err := client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			tCtx.Errorf("list the PodGroups of %s: %v", ns, err)
			return nil
		}
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			tCtx.Errorf("list the pods of %s: %v", ns, err)
			return nil
		}
		type member struct{ bound, total int }
		members := map[string]*member{}
		cliques := map[string]map[string]bool{}
		for _, p := range pods.Items {
			g := ""
			if p.Spec.SchedulingGroup != nil && p.Spec.SchedulingGroup.PodGroupName != nil {
				g = *p.Spec.SchedulingGroup.PodGroupName
			}
			if members[g] == nil {
				members[g], cliques[g] = &member{}, map[string]bool{}
			}
			members[g].total++
			if p.Spec.NodeName == "" {
				continue
			}
			bound++
			members[g].bound++
			cliques[g][clique[p.Spec.NodeName]] = true
			for _, c := range p.Spec.Containers {
				q := c.Resources.Requests[resourceGPU]
				free[clique[p.Spec.NodeName]] -= q.Value()
			}
		}
		for _, pg := range groups.Items {
			c.Gangs++
			m := members[pg.Name]
			if m == nil {
				tCtx.Errorf("gang %s/%s: no pod", ns, pg.Name)
				continue
			}
			minCount := 0
			if pg.Spec.SchedulingPolicy.Gang != nil {
				minCount = int(pg.Spec.SchedulingPolicy.Gang.MinCount)
			}
			switch {
			case m.bound > 0 && m.bound < minCount:
				c.Partial++
				tCtx.Errorf("gang %s/%s: %d of %d pods bound, minCount %d: part of a gang was bound", ns, pg.Name, m.bound, m.total, minCount)
			case m.bound == 0:
				tCtx.Errorf("gang %s/%s: none of its %d pods bound", ns, pg.Name, m.total)
			}
			if len(cliques[pg.Name]) > 1 {
				c.Split++
				tCtx.Errorf("gang %s/%s split across cliques %v", ns, pg.Name, cliques[pg.Name])
				continue
			}
			if m.bound == 0 || m.bound < minCount {
				continue
			}
			if m.bound == m.total {
				c.Placed++
			}
			for v := range cliques[pg.Name] {
				switch {
				case v == "":
					tCtx.Errorf("gang %s/%s placed on nodes without %s", ns, pg.Name, gangClique)
				case strings.HasPrefix(v, gangSmall):
					c.InSmall++
				default:
					c.InLarge++
				}
			}
		}
	}
	for v, f := range free {
		switch {
		case strings.HasPrefix(v, gangLarge) && f == 16*gangGPUs:
			c.LargeFree++
		case strings.HasPrefix(v, gangSmall) && f >= gangGPUs:
			c.SmallWithRoom++
		}
	}
	// The watch may lag behind the list: wait until it has seen as many
	// bindings as there are pods bound (or has failed).
	binds.waitFor(bound)
	bindings, twice, err := binds.stop()
	c.Bindings, c.BoundTwice = bindings, len(twice)
	if err != nil {
		tCtx.Errorf("bindings: %v", err)
	}
	for _, t := range twice {
		tCtx.Errorf("pod bound twice: %s", t)
	}
	if bindings < bound {
		tCtx.Errorf("the watch saw %d bindings, the API has %d pods bound", bindings, bound)
	}
	if c.Gangs == 0 {
		tCtx.Errorf("no PodGroup: nothing checked")
	}
	if !strings.Contains(name, "/Gang_default") && c.InLarge > 0 && c.SmallWithRoom > 0 {
		tCtx.Errorf("topology rules: %d gangs in large cliques while %d small cliques have room for a gang", c.InLarge, c.SmallWithRoom)
	}
	tCtx.Logf("gangs: %+v", *c)
	return c
}
