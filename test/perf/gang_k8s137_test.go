//go:build !k8s1.35 && !k8s1.36

package perf

import (
	"context"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// gangAvailable: the Gang workload runs on Kubernetes 1.37, whose
// scheduler_perf creates PodGroups (createPodGroups, v1beta1) and whose
// framework has the placement points TopologyNative implements.
const gangAvailable = true

// gangNativeName is the Gang workload's native twin.
const gangNativeName = TopologyNativeName

// gangPlugins are the Gang workload's native plugins.
var gangPlugins = frameworkruntime.Registry{TopologyNativeName: NewTopologyNative}

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
