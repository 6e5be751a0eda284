package plugin

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/wasmsched/wasmsched/host/lifecycle"
)

// DecodeArgs decodes, defaults and validates the plugin's arguments in a
// KubeSchedulerConfiguration: the policies of the profile and their
// lifecycle (lifecycle.Args documents every field).
func DecodeArgs(obj runtime.Object) (*lifecycle.Args, error) {
	args := &lifecycle.Args{}
	if obj != nil {
		if a, ok := obj.(*lifecycle.Args); ok {
			args = a.DeepCopy()
		} else if err := frameworkruntime.DecodeInto(obj, args); err != nil {
			return nil, fmt.Errorf("decode %s args: %w", Name, err)
		}
	}
	lifecycle.SetDefaults(args)
	if errs := lifecycle.Validate(args); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s args: %w", Name, errs.ToAggregate())
	}
	return args, nil
}
