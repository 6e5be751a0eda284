package policy

import (
	"fmt"
	"slices"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/host/clusterctx"
	"github.com/wasmsched/wasmsched/host/engine"
)

// ContextKinds returns the kinds of cluster object the guest declared it
// reads (PolicyInfo.context_kinds), in its order: the Binding's Stores
// follow it.
func (p *Policy) ContextKinds() []clusterctx.Kind {
	out := make([]clusterctx.Kind, len(p.info.GetContextKinds()))
	for i, k := range p.info.GetContextKinds() {
		out[i] = clusterctx.FromABI(k)
	}
	return out
}

// readsContext reports whether the guest declared cluster objects or tenant
// usage: it cannot serve a cycle until bound.
func readsContext(info *abiv1.PolicyInfo) bool {
	return len(info.GetContextKinds()) > 0 || info.GetWantsNamespaceUsage() || len(info.GetUsageLabelKeys()) > 0
}

// Bind gives the policy what it reads: b.Stores in the order of
// ContextKinds, b.Usage when it reads tenant usage, with Namespaces and
// LabelKeys as the guest declared them. Bind once, before serving: every
// instance is then brought up to date before each cycle it runs. A policy
// that declared context and was never bound fails its cycles. The caller
// makes sure the guest was allowed what it declared and calls WatchKey on
// b.Usage for each label key.
func (p *Policy) Bind(b *clusterctx.Binding) error {
	if b == nil {
		return fmt.Errorf("policy %s: nil binding", p.name)
	}
	kinds := p.ContextKinds()
	if len(b.Stores) != len(kinds) {
		return fmt.Errorf("policy %s: binding has %d stores for %d declared kinds", p.name, len(b.Stores), len(kinds))
	}
	for i, s := range b.Stores {
		if s == nil || s.Kind() != kinds[i] {
			return fmt.Errorf("policy %s: binding's store %d is not of kind %s", p.name, i, kinds[i])
		}
	}
	if (b.Namespaces || len(b.LabelKeys) > 0) && b.Usage == nil {
		return fmt.Errorf("policy %s: binding asks for tenant usage without a Usage", p.name)
	}
	if p.info.GetWantsNamespaceUsage() && !b.Namespaces {
		return fmt.Errorf("policy %s: the guest reads usage per namespace; the binding does not provide it", p.name)
	}
	for _, k := range p.info.GetUsageLabelKeys() {
		if !slices.Contains(b.LabelKeys, k) {
			return fmt.Errorf("policy %s: the guest reads usage per label %q; the binding does not provide it", p.name, k)
		}
	}
	if !p.binding.CompareAndSwap(nil, b) {
		return fmt.Errorf("policy %s: already bound", p.name)
	}
	return nil
}

// contextPosition is what a member holds of its binding: the position in
// each store's change log, in the order of Binding.Stores, and in the
// usage's.
type contextPosition struct {
	objects []uint64
	usage   uint64
	buf     []byte // reused request buffer
}

// syncContext sends m what changed in its policy's cluster objects and
// tenant usage since m's last sync, in requests of at most maxSyncBatch
// bytes.
func (p *Policy) syncContext(m *member) error {
	b := p.binding.Load()
	if b == nil {
		return p.CallError("cycle", engine.KindHost, fmt.Errorf("the policy reads cluster objects or tenant usage but the scheduler never bound it to them"))
	}
	pos := &m.ctx
	if len(pos.objects) < len(b.Stores) {
		pos.objects = append(pos.objects, make([]uint64, len(b.Stores)-len(pos.objects))...)
	}
	req := pos.buf[:0]
	next := make([]uint64, len(b.Stores))
	objects := 0
	for i, s := range b.Stores {
		var n int
		req, next[i], n = s.AppendSince(req, int32(i), pos.objects[i])
		objects += n
	}
	usageNext, tenants := pos.usage, 0
	if b.Usage != nil && (b.Namespaces || len(b.LabelKeys) > 0) {
		req, usageNext, tenants = b.Usage.AppendSince(req, b.Namespaces, b.LabelKeys, pos.usage)
	}
	if len(req) > 0 {
		for _, piece := range clusterctx.SplitEntries(req, maxSyncBatch) {
			if p.onContextSync != nil {
				p.onContextSync(piece)
			}
			code, err := m.in.Sync(piece)
			if err != nil {
				return err
			}
			if code != abiv1.Code_CODE_SUCCESS {
				m.in.MarkBroken() // what it holds is now unknown
				return p.detailError(m, "sync", code)
			}
		}
	}
	copy(pos.objects, next)
	pos.usage = usageNext
	if cap(req) <= 2*maxSyncBatch {
		pos.buf = req[:0]
	} else {
		pos.buf = nil
	}
	p.stats.objectsSent.Add(int64(objects))
	p.stats.tenantUsageSent.Add(int64(tenants))
	return nil
}
