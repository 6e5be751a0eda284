package clusterctx

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/convert"
)

// Store holds the objects of one kind, each encoded once as an ABI
// ContextObject (without its kind index, which differs per policy and is
// added as entries are appended), and a change log: every Set or Delete that
// changes something takes the next sequence number, and an instance that
// synced up to sequence n is sent only the objects whose last change is
// after n, each once (coalescing), however often it changed.
//
// The log is compacted as it grows: superseded records go first, then
// deletions (tombstones), which raises the floor; an instance whose
// position is below the floor may have missed a deletion and is sent
// objects_reset and every object instead.
//
// A Store is safe for concurrent use: one informer goroutine writes while
// any number of instances read.
type Store struct {
	kind Kind

	mu      sync.RWMutex
	objs    map[objectKey]*object
	log     []logRecord // by seq, ascending
	seq     uint64      // the last sequence number given out
	floor   uint64      // positions below it get a reset
	live    int         // objects not deleted
	deleted int         // tombstones in objs

	// listeners are told of every change, after it is recorded.
	listeners atomic.Pointer[[]func()]
}

// OnChange registers fn, called after every change the store records (an
// object added, changed or deleted), on the goroutine that made it: the
// informer's. fn must return quickly.
func (s *Store) OnChange(fn func()) {
	for {
		old := s.listeners.Load()
		var next []func()
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, fn)
		if s.listeners.CompareAndSwap(old, &next) {
			return
		}
	}
}

// changed tells the listeners; s.mu is not held.
func (s *Store) changed() {
	if ls := s.listeners.Load(); ls != nil {
		for _, fn := range *ls {
			fn()
		}
	}
}

type objectKey struct{ namespace, name string }

type object struct {
	key objectKey
	seq uint64 // of the last change
	uid string
	rv  string
	// body is the ContextObject without kind; nil once deleted.
	body []byte
}

type logRecord struct {
	seq uint64
	obj *object
}

// Compaction thresholds: the log is rebuilt when it holds more than twice
// the objects' records plus logSlack, and deletions are forgotten (raising
// the floor) when they outnumber a quarter of the live objects plus
// tombstoneSlack. Both keep the log's size proportional to the kind's.
const (
	logSlack       = 256
	tombstoneSlack = 256
)

// NewStore returns an empty store for kind k.
func NewStore(k Kind) *Store {
	return &Store{kind: k, objs: map[objectKey]*object{}}
}

// Kind returns the store's kind.
func (s *Store) Kind() Kind { return s.kind }

// Len returns how many objects the store holds.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.live
}

// Seq returns the sequence number of the last change: an instance whose
// position equals it holds everything.
func (s *Store) Seq() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seq
}

// Set inserts or replaces obj, a typed object or an
// *unstructured.Unstructured. An object whose uid and resource version are
// those the store holds is not a change (an informer's resync).
func (s *Store) Set(obj runtime.Object) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("%s: %w", s.kind, err)
	}
	key := objectKey{acc.GetNamespace(), acc.GetName()}
	uid, rv := string(acc.GetUID()), acc.GetResourceVersion()
	s.mu.RLock()
	old := s.objs[key]
	same := old != nil && old.body != nil && rv != "" && old.uid == uid && old.rv == rv
	s.mu.RUnlock()
	if same {
		return nil
	}
	body, err := encodeObject(obj, acc)
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.kind, key, err)
	}
	s.mu.Lock()
	o := s.objs[key]
	switch {
	case o == nil:
		o = &object{key: key}
		s.objs[key] = o
		s.live++
	case o.body == nil:
		s.deleted--
		s.live++
	}
	o.uid, o.rv, o.body = uid, rv, body
	s.record(o)
	s.mu.Unlock()
	s.changed()
	return nil
}

// Delete removes an object; deleting one the store does not hold is not a
// change.
func (s *Store) Delete(namespace, name string) {
	s.mu.Lock()
	o := s.objs[objectKey{namespace, name}]
	if o == nil || o.body == nil {
		s.mu.Unlock()
		return
	}
	o.body, o.uid, o.rv = nil, "", ""
	s.live--
	s.deleted++
	s.record(o)
	s.mu.Unlock()
	s.changed()
}

// record gives o the next sequence number and compacts the log when due.
// s.mu is held.
func (s *Store) record(o *object) {
	s.seq++
	o.seq = s.seq
	s.log = append(s.log, logRecord{seq: s.seq, obj: o})
	if s.deleted > s.live/4+tombstoneSlack {
		for k, o := range s.objs {
			if o.body == nil {
				s.floor = max(s.floor, o.seq)
				delete(s.objs, k)
			}
		}
		s.deleted = 0
		s.compact()
	} else if len(s.log) > 2*len(s.objs)+logSlack {
		s.compact()
	}
}

// compact keeps the latest record of each object the store still knows.
func (s *Store) compact() {
	kept := make([]logRecord, 0, len(s.objs))
	for _, r := range s.log {
		if r.obj.seq == r.seq && s.objs[r.obj.key] == r.obj {
			kept = append(kept, r)
		}
	}
	s.log = kept
}

// AppendSince appends to dst the NodeSync entries (fields objects_reset,
// objects and objects_removed, with kindIndex as the kind) that bring an
// instance at position seq to the store's current state, and returns the
// new position and how many objects or removals it appended. Position 0 is
// an instance that holds none of the kind: it gets every object. A
// position below the compaction floor gets objects_reset and every object.
func (s *Store) AppendSince(dst []byte, kindIndex int32, seq uint64) (out []byte, next uint64, n int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if seq == s.seq {
		return dst, seq, 0
	}
	full := seq == 0 || seq < s.floor || seq > s.seq
	if full && seq != 0 {
		dst = appendReset(dst, kindIndex)
	}
	start := 0
	if !full {
		start = sort.Search(len(s.log), func(i int) bool { return s.log[i].seq > seq })
	}
	for _, r := range s.log[start:] {
		o := r.obj
		if o.seq != r.seq {
			continue // superseded by a later record
		}
		if o.body != nil {
			dst = appendKindEntry(dst, tagObjects, kindIndex, o.body)
			n++
			continue
		}
		if full {
			continue
		}
		ref := abiv1.ObjectRef{Namespace: o.key.namespace, Name: o.key.name}
		body, err := ref.MarshalVT()
		if err != nil {
			panic(err)
		}
		dst = appendKindEntry(dst, tagObjectsRemoved, kindIndex, body)
		n++
	}
	return dst, s.seq, n
}

// Handler returns the informer event handler that keeps the store current:
// adds and updates Set, deletes (including a DeletedFinalStateUnknown)
// Delete.
func (s *Store) Handler() cache.ResourceEventHandler {
	set := func(obj any) {
		ro, ok := obj.(runtime.Object)
		if !ok {
			klog.ErrorS(nil, "Context object of an unexpected type", "kind", s.kind.String(), "type", fmt.Sprintf("%T", obj))
			return
		}
		if err := s.Set(ro); err != nil {
			klog.ErrorS(err, "Context object not stored", "kind", s.kind.String())
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			acc, err := meta.Accessor(obj)
			if err != nil {
				klog.ErrorS(err, "Deleted context object of an unexpected type", "kind", s.kind.String())
				return
			}
			s.Delete(acc.GetNamespace(), acc.GetName())
		},
	}
}

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// encodeObject encodes obj as a ContextObject without kind: its identity,
// its labels sorted, and the whole object as JSON without
// metadata.managedFields. obj itself is not modified.
func encodeObject(obj runtime.Object, acc metav1.Object) ([]byte, error) {
	var js []byte
	var err error
	if u, ok := obj.(*unstructured.Unstructured); ok {
		content := u.Object
		if md, ok := content["metadata"].(map[string]any); ok {
			if _, has := md["managedFields"]; has {
				content = shallowCopy(content)
				md = shallowCopy(md)
				delete(md, "managedFields")
				content["metadata"] = md
			}
		}
		js, err = json.Marshal(content)
	} else {
		if len(acc.GetManagedFields()) > 0 {
			obj = obj.DeepCopyObject()
			cacc, err := meta.Accessor(obj)
			if err != nil {
				return nil, err
			}
			cacc.SetManagedFields(nil)
		}
		js, err = json.Marshal(obj)
	}
	if err != nil {
		return nil, err
	}
	co := abiv1.ContextObject{
		Namespace:       acc.GetNamespace(),
		Name:            acc.GetName(),
		Uid:             string(acc.GetUID()),
		ResourceVersion: acc.GetResourceVersion(),
		Labels:          convert.KeyValues(acc.GetLabels()),
		Json:            js,
	}
	return co.MarshalVT()
}

func shallowCopy(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
