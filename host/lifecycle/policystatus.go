package lifecycle

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
)

// policyStatusWriter writes policies' status through their store
// (SchedulingPolicies' status subresource, static policies' state
// ConfigMap): this replica's
// entry always, the fields outside Replicas when this replica holds the
// status lease (Args.StatusLease; without one, always). Writes follow
// changes, are retried with backoff when they fail (a namespace or a
// resource created later, an API server away), and each entry is
// refreshed every statusHeartbeat so that entries of replicas that are
// gone can be pruned.
type policyStatusWriter struct {
	c *catalog

	mu    sync.Mutex
	dirty map[string]bool
	all   bool
	wake  chan struct{}

	leaderUntil time.Time
	isLeader    bool
}

func newPolicyStatusWriter(c *catalog) *policyStatusWriter {
	return &policyStatusWriter{c: c, dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (w *policyStatusWriter) touch(name string) {
	w.mu.Lock()
	w.dirty[name] = true
	w.mu.Unlock()
	w.poke()
}

func (w *policyStatusWriter) touchAll() {
	w.mu.Lock()
	w.all = true
	w.mu.Unlock()
	w.poke()
}

func (w *policyStatusWriter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes until ctx ends (writeLoop): the policies touched, every
// policy at each heartbeat.
func (w *policyStatusWriter) run(ctx context.Context) {
	writeLoop(ctx, w.wake, w.touchAll, w.writeDirty)
}

// writeDirty writes the status of the policies touched since the last
// call; those whose write failed stay touched.
func (w *policyStatusWriter) writeDirty(ctx context.Context) error {
	// c.mu is taken after w.mu is released: refusals hold c.mu and touch.
	w.mu.Lock()
	names, all := w.dirty, w.all
	w.dirty, w.all = map[string]bool{}, false
	w.mu.Unlock()
	if all {
		w.c.mu.Lock()
		for n := range w.c.entries {
			names[n] = true
		}
		w.c.mu.Unlock()
	}
	var failed error
	for name := range names {
		err := w.c.store.update(ctx, name, func(sp *api.SchedulingPolicy) { w.c.report(ctx, sp) })
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			w.c.logger.V(2).Info("Could not write a SchedulingPolicy's status; retrying", "policy", name, "err", err)
			w.mu.Lock()
			w.dirty[name] = true
			w.mu.Unlock()
			failed = err
		}
	}
	return failed
}

// leader reports whether this replica writes the shared status fields.
func (w *policyStatusWriter) leader(ctx context.Context) bool {
	lease := w.c.l.args.StatusLease
	if lease == "" || w.c.l.opts.Client == nil {
		return true
	}
	w.mu.Lock()
	if time.Now().Before(w.leaderUntil) {
		defer w.mu.Unlock()
		return w.isLeader
	}
	w.mu.Unlock()
	ns, name, _ := strings.Cut(lease, "/")
	is := false
	if l, err := w.c.l.opts.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
		host, _ := os.Hostname()
		h := *l.Spec.HolderIdentity
		is = h == host || strings.HasPrefix(h, host+"_")
	} else if err != nil && apierrors.IsNotFound(err) {
		is = true // no election yet: the one replica writes
	}
	w.mu.Lock()
	w.isLeader, w.leaderUntil = is, time.Now().Add(10*time.Second)
	w.mu.Unlock()
	return is
}

// replicaStatus is this replica's entry in sp's status, if any.
func (c *catalog) replicaStatus(sp *api.SchedulingPolicy) *api.ReplicaStatus {
	for i := range sp.Status.Replicas {
		r := &sp.Status.Replicas[i]
		if r.Name == c.l.replica && r.Profile == c.l.opts.Profile {
			return r
		}
	}
	return nil
}

// setReplica applies fn to this replica's entry (adding it), refreshes its
// heartbeat when due and prunes entries of replicas gone quiet.
func (c *catalog) setReplica(sp *api.SchedulingPolicy, fn func(*api.ReplicaStatus)) {
	r := c.replicaStatus(sp)
	if r == nil {
		sp.Status.Replicas = append(sp.Status.Replicas, api.ReplicaStatus{Name: c.l.replica, Profile: c.l.opts.Profile})
		r = &sp.Status.Replicas[len(sp.Status.Replicas)-1]
	}
	before := r.DeepCopy()
	fn(r)
	now := time.Now()
	if !reflect.DeepEqual(before, r) || now.Sub(r.Heartbeat.Time) > statusHeartbeat/2 {
		r.Heartbeat = metav1.NewTime(now)
	}
	kept := sp.Status.Replicas[:0]
	for _, o := range sp.Status.Replicas {
		if (o.Name == c.l.replica && o.Profile == r.Profile) || now.Sub(o.Heartbeat.Time) < replicaExpiry {
			kept = append(kept, o)
		}
	}
	sp.Status.Replicas = kept
}

// report writes this replica's view of sp into its status.
func (c *catalog) report(ctx context.Context, sp *api.SchedulingPolicy) {
	c.mu.Lock()
	e := c.entries[sp.Name]
	if e == nil {
		c.mu.Unlock()
		// Not selected by this profile (any more): drop this replica's
		// entry, leave the rest to the profiles that select it.
		kept := sp.Status.Replicas[:0]
		for _, o := range sp.Status.Replicas {
			if o.Name != c.l.replica || o.Profile != c.l.opts.Profile {
				kept = append(kept, o)
			}
		}
		sp.Status.Replicas = kept
		return
	}
	v := e.view()
	c.mu.Unlock()
	c.setReplica(sp, func(r *api.ReplicaStatus) {
		r.Key, r.SHA256, r.Ready, r.Message = v.key, v.sha256, v.ready.Status == metav1.ConditionTrue, ""
		if !r.Ready {
			r.Message = v.ready.Message
		}
	})
	if !c.status.leader(ctx) {
		return
	}
	st := &sp.Status
	st.ObservedGeneration = v.generation
	st.Serving = v.serving
	st.ServingDigest = ""
	st.LoadedAt = nil
	if v.serving != nil {
		st.ServingDigest = api.ShortDigest(v.serving.Module.SHA256)
		st.LoadedAt = v.loadedAt
	}
	v.ready.ObservedGeneration, v.rejected.ObservedGeneration = v.generation, v.generation
	meta.SetStatusCondition(&st.Conditions, v.ready)
	meta.SetStatusCondition(&st.Conditions, v.rejected)
}

// view is what this replica sees of a policy, for status.
type view struct {
	generation      int64
	key, sha256     string
	serving         *api.Revision
	loadedAt        *metav1.Time
	ready, rejected metav1.Condition
}

// view computes the entry's status. The caller holds c.mu.
func (e *entry) view() view {
	v := view{generation: e.sp.Generation}
	cur := e.slot.Current()
	if cur != nil {
		v.key = e.slot.currentKey()
		if r, ok := e.revs[v.key]; ok {
			v.serving = r.DeepCopy()
			v.sha256 = r.Module.SHA256
		}
		t := metav1.NewTime(cur.LoadedAt())
		v.loadedAt = &t
	}
	want := e.want
	r, failed := e.failed[want.Key]
	failure := r.err
	loading := e.slot.loading()
	switch {
	case cur != nil && v.key == want.Key:
		v.ready = cond(api.ConditionReady, true, api.ReasonServing, "revision "+want.Short()+" serves")
	case !failed && (loading || cur == nil):
		v.ready = cond(api.ConditionReady, false, api.ReasonLoading, "revision "+want.Short()+" is loading")
		if cur != nil {
			v.ready.Message += "; " + e.servingNote() + " meanwhile"
		}
	case r.kind == api.ReasonQuarantined:
		v.ready = cond(api.ConditionReady, false, api.ReasonQuarantined, fmt.Sprintf("%v; %s", failure, e.servingNow(v)))
	case cur != nil:
		v.ready = cond(api.ConditionReady, false, api.ReasonServingLastGood, fmt.Sprintf("revision %s was refused; %s", want.Short(), e.servingNow(v)))
	default:
		v.ready = cond(api.ConditionReady, false, api.ReasonNoVersion, fmt.Sprintf("revision %s was refused and no other revision loads: %v", want.Short(), failure))
	}
	if failed {
		v.rejected = cond(api.ConditionRejected, true, r.kind, fmt.Sprintf("revision %s: %v", want.Short(), failure))
	} else {
		v.rejected = cond(api.ConditionRejected, false, api.ReasonAccepted, "")
	}
	return v
}

func (e *entry) servingNow(v view) string {
	if v.serving != nil {
		return "revision " + v.serving.Short() + " serves instead"
	}
	return "nothing serves"
}

func cond(t string, ok bool, reason, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	if len(msg) > 32000 {
		msg = msg[:32000]
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
}
