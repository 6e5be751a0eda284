package plugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Which cluster events the plugin registers with the framework.
//
// The framework takes a plugin's events once, when the profile is built,
// and from then on asks the plugin's hints about every pod it rejected on
// every event it registered: with thousands of pods pending, an event
// nobody needs costs thousands of calls each time a pod is bound. So the
// plugin registers what the policies serving when the profile is built
// declared (their Requeue), as a native plugin registers what its rules
// read, and nothing else. A version that later declares more (a new
// version, a policy selected later) is covered by the plugin itself: its
// own informer handlers see the events the framework was not told about
// and activate the pods the hints would have queued (uncovered below).
// The framework's registration is only ever an optimisation of that path.

// eventSet is a set of the event kinds policies can declare.
type eventSet uint16

const (
	evNodeAdd eventSet = 1 << iota
	evNodeLabel
	evNodeAllocatable
	evNodeTaint
	// evNodeOther: any node update (Requeue.node_updated).
	evNodeOther
	// evPodArrival: a pod added, bound or relabelled, or a pending pod
	// deleted (Requeue.pod_added).
	evPodArrival
	// evPodDeparture: a pod leaving a node, deleted or scaled down
	// (Requeue.pod_deleted).
	evPodDeparture
	// evPodOther: every pod event (a policy that declared nothing).
	evPodOther

	evNodeUpdate = evNodeLabel | evNodeAllocatable | evNodeTaint | evNodeOther
	evPodAny     = evPodArrival | evPodDeparture | evPodOther
	evAll        = evNodeAdd | evNodeUpdate | evPodAny
)

// needs is the set of events that can turn a rejection by a policy with
// info into a fit. A policy that declared nothing needs every event, as
// its rules may read anything of nodes and pods.
func needs(info *abiv1.PolicyInfo) eventSet {
	req := info.GetRequeue()
	if req == nil {
		return evAll
	}
	var s eventSet
	if nodeFields(req) {
		s |= evNodeAdd // node_added, or a new node is a change of all its properties
	}
	if len(req.GetNodeLabelKeys()) > 0 {
		s |= evNodeLabel
	}
	if req.GetNodeAllocatable() {
		s |= evNodeAllocatable
	}
	if req.GetNodeTaints() {
		s |= evNodeTaint
	}
	if req.GetNodeUpdated() {
		s |= evNodeOther
	}
	if req.GetPodAdded() != nil {
		s |= evPodArrival
	}
	if req.GetPodDeleted() != nil {
		s |= evPodDeparture
	}
	return s
}

// rosterNeeds is the union of what the roster's policies need. A policy
// without a version may get one declaring anything: it counts as needing
// every event.
func rosterNeeds(r *roster) eventSet {
	var s eventSet
	for _, run := range r.runs {
		v := run.slot.Current()
		if v == nil {
			return evAll
		}
		s |= needs(v.Info())
	}
	return s
}

// nodeUpdateActions is the node update the framework should report for s.
func nodeUpdateActions(s eventSet) fwk.ActionType {
	if s&evNodeOther != 0 {
		return fwk.Update
	}
	var a fwk.ActionType
	if s&evNodeLabel != 0 {
		a |= fwk.UpdateNodeLabel
	}
	if s&evNodeAllocatable != 0 {
		a |= fwk.UpdateNodeAllocatable
	}
	if s&evNodeTaint != 0 {
		a |= fwk.UpdateNodeTaint
	}
	return a
}

// EventsToRegister registers, each with a hint that asks the policies that
// rejected the pod whether they declared the event, the events the
// policies serving now need (rosterNeeds); a change of the pending pod
// itself always. It records what it registered so that the plugin covers
// the rest itself.
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	s := rosterNeeds(pl.currentRoster())
	var events []fwk.ClusterEventWithHint
	if s&evNodeAdd != 0 {
		events = append(events, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, QueueingHintFn: pl.hintNodeAdded})
	}
	if a := nodeUpdateActions(s); a != 0 {
		events = append(events, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: a}, QueueingHintFn: pl.hintNodeUpdated})
	}
	events = append(events, pl.podEvents(s)...)
	// A PodGroup's changes concern its members whatever their policies
	// declared (none before 1.36).
	events = append(events, pl.groupEvents()...)
	pl.registered.Store(uint32(s) | evRegistered)
	return events, nil
}

// evRegistered marks registered as set by EventsToRegister; until then
// the framework is taken to cover every event (no framework, or not built
// yet: nothing to cover for it).
const evRegistered = 1 << 16

// uncovered is what the current roster needs that the framework was not
// told about.
func (pl *Plugin) uncovered() eventSet {
	reg := pl.registered.Load()
	if reg&evRegistered == 0 {
		return 0
	}
	return rosterNeeds(pl.currentRoster()) &^ eventSet(reg)
}

// coverEvents adds the informer handlers that stand in for the framework
// on the events it was not told about: each activates the pods the hint
// would have queued. They return at once while the framework covers
// everything the roster needs.
func (pl *Plugin) coverEvents() {
	if pl.handle == nil || pl.handle.SharedInformerFactory() == nil {
		return
	}
	f := pl.handle.SharedInformerFactory()
	_, _ = f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pl.uncovered()&evNodeAdd != 0 {
				pl.activateOnEvent(func(pod *v1.Pod) (fwk.QueueingHint, error) {
					return pl.hintNodeAdded(klog.Background(), pod, nil, obj)
				})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if pl.uncovered()&evNodeUpdate != 0 {
				pl.activateOnEvent(func(pod *v1.Pod) (fwk.QueueingHint, error) {
					return pl.hintNodeUpdated(klog.Background(), pod, oldObj, newObj)
				})
			}
		},
	})
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pl.uncovered()&(evPodArrival|evPodOther) != 0 {
				pl.activateOnEvent(func(pod *v1.Pod) (fwk.QueueingHint, error) {
					return pl.hintPodAdded(klog.Background(), pod, nil, obj)
				})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if pl.uncovered()&evPodAny == 0 {
				return
			}
			updated, _ := newObj.(*v1.Pod)
			pl.activateOnEvent(func(pod *v1.Pod) (fwk.QueueingHint, error) {
				if updated != nil && updated.UID == pod.UID {
					return fwk.QueueSkip, nil // the framework asks about a pod's own updates
				}
				return pl.hintPodUpdated(klog.Background(), pod, oldObj, newObj)
			})
		},
		DeleteFunc: func(obj any) {
			if pl.uncovered()&evPodAny != 0 {
				pl.activateOnEvent(func(pod *v1.Pod) (fwk.QueueingHint, error) {
					return pl.hintPodDeleted(klog.Background(), pod, obj, nil)
				})
			}
		},
	})
}

// activateOnEvent activates the rejected pods for which hint answers Queue.
func (pl *Plugin) activateOnEvent(hint func(*v1.Pod) (fwk.QueueingHint, error)) {
	pl.activate("event", func(r *rejection) bool {
		h, err := hint(r.pod)
		return err != nil || h == fwk.Queue
	})
}

// registeredEvents is what EventsToRegister registered (tests).
func (pl *Plugin) registeredEvents() eventSet {
	return eventSet(pl.registered.Load() &^ evRegistered)
}
