package lifecycle

import (
	"context"
	"encoding/json"
	"regexp"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// StatusConfigMap is the ConfigMap, in the plugin's namespace, where every
// scheduler replica publishes what each statically configured policy runs
// (read by `wasmsched status`). Each replica and profile writes its own
// key.
const StatusConfigMap = "wasmsched-status"

// Status is one replica's and profile's report.
type Status struct {
	Replica  string       `json:"replica"`
	Profile  string       `json:"profile"`
	Updated  time.Time    `json:"updated"`
	Policies []SlotStatus `json:"policies"`
}

// statusWriter publishes slot statuses, at most about once a second.
type statusWriter struct {
	client    kubernetes.Interface
	namespace string
	key       string
	replica   string
	profile   string

	// slots are the static policies reported; selection, for a profile
	// that selects SchedulingPolicies, how it does (its policies report
	// in their own status).
	slots     func() []*Slot
	selection *PolicySelection
	dirty     chan struct{}
}

var unsafeKey = regexp.MustCompile(`[^-._a-zA-Z0-9]+`)

func newStatusWriter(client kubernetes.Interface, namespace, profile string, slots func() []*Slot, selection *PolicySelection) *statusWriter {
	replica := replicaName()
	w := &statusWriter{client: client, namespace: namespace, replica: replica, profile: profile, slots: slots, selection: selection, dirty: make(chan struct{}, 1)}
	w.key = unsafeKey.ReplaceAllString(replica+"."+profile, "_") + ".json"
	return w
}

// touch asks for a write.
func (w *statusWriter) touch() {
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

// Snapshot returns the current report.
func (w *statusWriter) Snapshot() ProfileReport {
	st := ProfileReport{Status: Status{Replica: w.replica, Profile: w.profile, Updated: time.Now().UTC(), Policies: []SlotStatus{}}, Selection: w.selection}
	for _, s := range w.slots() {
		st.Policies = append(st.Policies, s.Status())
	}
	return st
}

func (w *statusWriter) run(ctx context.Context) {
	if w.client == nil {
		return
	}
	w.touch()
	writeLoop(ctx, w.dirty, nil, func(ctx context.Context) error {
		err := w.write(ctx)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Could not publish policy status; retrying", "configMap", w.namespace+"/"+StatusConfigMap, "err", err)
		}
		return err
	})
}

// writeLoop runs write until ctx ends: each time wake fires, at every
// statusHeartbeat (after beat, if set), and after a failed write again
// with backoff (1s doubling to 30s), so that a write that failed (a
// namespace or an object made after the scheduler, the API server away)
// is retried rather than left until the next change. It writes at most
// once a second, whatever the churn.
func writeLoop(ctx context.Context, wake <-chan struct{}, beat func(), write func(context.Context) error) {
	heartbeat := time.NewTicker(statusHeartbeat)
	defer heartbeat.Stop()
	backoff := time.Duration(0)
	for {
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-heartbeat.C:
			if beat != nil {
				beat()
			}
		case <-retry:
		}
		switch err := write(ctx); {
		case err == nil:
			backoff = 0
		case backoff == 0:
			backoff = time.Second
		default:
			backoff = min(2*backoff, 30*time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// prune drops the reports of replicas that have not refreshed theirs for
// replicaExpiry (every replica refreshes every statusHeartbeat).
func (w *statusWriter) prune(data map[string]string, now time.Time) {
	for k, raw := range data {
		if k == w.key {
			continue
		}
		var st Status
		if json.Unmarshal([]byte(raw), &st) == nil && now.Sub(st.Updated) > replicaExpiry {
			delete(data, k)
		}
	}
}

func (w *statusWriter) write(ctx context.Context) error {
	b, err := json.MarshalIndent(w.Snapshot(), "", "  ")
	if err != nil {
		return err
	}
	cms := w.client.CoreV1().ConfigMaps(w.namespace)
	for attempt := 0; attempt < 3; attempt++ {
		cm, err := cms.Get(ctx, StatusConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StatusConfigMap, Namespace: w.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "wasmsched"}}, Data: map[string]string{w.key: string(b)}}
			if _, err = cms.Create(ctx, cm, metav1.CreateOptions{}); err == nil || !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[w.key] = string(b)
		w.prune(cm.Data, time.Now())
		if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}
