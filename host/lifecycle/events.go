package lifecycle

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
)

// maxEventNote is the longest Event message the API server accepts.
const maxEventNote = 1024

// Event reasons, one set for every kind of policy. Events about a
// SchedulingPolicy are posted on it; about a static policy, on its first
// ConfigMap (or the damaged chunk) when its source is ConfigMaps.
const (
	EventRejected        = "PolicyRejected"        // a revision was refused
	EventServing         = "PolicyServing"         // the wanted revision serves
	EventServingLastGood = "PolicyServingLastGood" // the last good revision serves instead
	EventQuarantined     = "PolicyQuarantined"     // a revision was quarantined
	EventShadowsNothing  = "PolicyShadowsNothing"  // a shadow without a target
)

// eventSink posts a lifecycle's Events. kube-scheduler starts its Event
// broadcaster after it has made the plugins and before it starts its
// informers, so Events recorded while the lifecycle starts (a fallback, a
// quarantine) would be dropped: they are held until ready says the
// broadcaster runs (or two minutes have passed). Its methods are safe for
// concurrent use.
type eventSink struct {
	recorder events.EventRecorder
	ready    func() bool

	mu       sync.Mutex
	held     []heldEvent
	released bool
}

// heldEvent is an Event waiting for the scheduler's recorder to run.
type heldEvent struct {
	ref                     *v1.ObjectReference
	eventType, reason, note string
}

func newEventSink(recorder events.EventRecorder, ready func() bool) *eventSink {
	return &eventSink{recorder: recorder, ready: ready}
}

// post records an Event on ref, or holds it until release.
func (s *eventSink) post(ref *v1.ObjectReference, eventType, reason, note string) {
	if s.recorder == nil {
		return
	}
	if len(note) > maxEventNote {
		note = note[:maxEventNote-4] + " ..."
	}
	s.mu.Lock()
	if !s.released {
		s.held = append(s.held, heldEvent{ref: ref, eventType: eventType, reason: reason, note: note})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.recorder.Eventf(ref, nil, eventType, reason, "Load", "%s", note)
}

// release sends the Events held since start-up once ready reports true
// (polled), or after two minutes, or never when ctx ends first.
func (s *eventSink) release(ctx context.Context) {
	deadline := time.Now().Add(2 * time.Minute)
	for s.ready != nil && time.Now().Before(deadline) && !s.ready() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.mu.Lock()
	held := s.held
	s.held, s.released = nil, true
	s.mu.Unlock()
	for _, e := range held {
		s.post(e.ref, e.eventType, e.reason, e.note)
	}
}
