package lifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source"
)

// store is where a profile's policies are declared and where their state
// (last good revision, quarantines, this replica's probation marks,
// conditions) is kept: SchedulingPolicy resources (crdStore) or the
// plugin's arguments (staticStore). Both present each policy as an
// api.SchedulingPolicy, so that the catalog and every revision's life
// (revision.go) are one piece of code, whatever the kind of policy.
//
// The catalog calls selected, get, argsOf, pending, required and ceilings
// under its mu; they must not block. update, fetch and keep may block
// (each under a context or a bounded write) and are never called under
// the catalog's mu.
type store interface {
	// start begins watching until ctx ends, calling changed after every
	// change; it returns once what exists has been read, or startup is
	// done.
	start(ctx, startup context.Context, changed func())
	// selected returns the policies the profile runs, in order, and the
	// required ones that cannot serve for want of a declaration.
	selected() ([]*api.SchedulingPolicy, []Blocker)
	// get returns the policy called name as selected last.
	get(name string) (*api.SchedulingPolicy, bool)
	// argsOf turns a spec into the arguments its revision loads with.
	argsOf(sp *api.SchedulingPolicy) PolicyArgs
	// pending reports that the spec names no module yet: a static
	// policy's source has not reported.
	pending(sp *api.SchedulingPolicy) bool
	// deactivated reports that the policy's source is gone and the policy
	// stops applying until it comes back (a static policy with onDelete
	// Deactivate).
	deactivated(name string) bool
	// refetch reports whether a fetch of the same revision that failed is
	// tried again now that the spec was read anew (prev: as read before).
	refetch(prev, sp *api.SchedulingPolicy) bool
	// required reports that pods wait while the policy has no version.
	required(name string) bool
	// ceilings bound the revisions' limits; nil: none.
	ceilings() *Ceilings
	// update reads the policy's state, lets mutate change its status and
	// writes it back if it changed.
	update(ctx context.Context, name string, mutate func(*api.SchedulingPolicy)) error
	// fetch reads a revision's module, checked against its digest.
	fetch(ctx context.Context, name string, m api.Module) (source.Version, error)
	// resolve reads what the OCI tag m names now (ocitag.go).
	resolve(ctx context.Context, name string, m api.Module) (source.OCIResolution, error)
	// keep stores the module of a revision that became the last good one
	// where a restart finds it, if the module's own place may not keep it.
	keep(rev api.Revision, module []byte) error
	// rejectedNote is the message of the Event that says rev was refused
	// with err.
	rejectedNote(e *entry, rev api.Revision, err error) string
	// eventRef is the object Events about sp are posted on (err may name
	// a more precise one); nil: none.
	eventRef(sp *api.SchedulingPolicy, err error) *v1.ObjectReference
}
