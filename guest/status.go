package guest

import (
	"fmt"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// Code is the verdict of a policy function. The values match the ABI's
// abiv1.Code; the zero value is invalid and the host treats it as an error,
// so a Status that was never set cannot let a pod through.
type Code int32

const (
	Success                      = Code(abiv1.Code_CODE_SUCCESS)
	Error                        = Code(abiv1.Code_CODE_ERROR)
	Unschedulable                = Code(abiv1.Code_CODE_UNSCHEDULABLE)
	UnschedulableAndUnresolvable = Code(abiv1.Code_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE)
	Wait                         = Code(abiv1.Code_CODE_WAIT)
	Skip                         = Code(abiv1.Code_CODE_SKIP)
	Pending                      = Code(abiv1.Code_CODE_PENDING)
)

// String returns the code as the scheduler framework spells it.
func (c Code) String() string {
	switch c {
	case Success:
		return "Success"
	case Error:
		return "Error"
	case Unschedulable:
		return "Unschedulable"
	case UnschedulableAndUnresolvable:
		return "UnschedulableAndUnresolvable"
	case Wait:
		return "Wait"
	case Skip:
		return "Skip"
	case Pending:
		return "Pending"
	}
	return fmt.Sprintf("Invalid(%d)", int32(c))
}

// Status is a code and the reasons that explain it. Reasons appear in the
// scheduler's FailedScheduling events; start them with the policy's name
// ("gpu: insufficient free nvidia.com/gpu: need 2, free 1").
type Status struct {
	Code    Code
	Reasons []string
}

// OK reports success.
func OK() Status { return Status{Code: Success} }

// IsSuccess reports whether s is a success.
func (s Status) IsSuccess() bool { return s.Code == Success }

// Reject reports that the pod does not fit; another node or a later attempt
// may succeed. The reason is fmt.Sprintf(format, args...), or format as it
// is when there are no args (see sprintf); go vet checks the call like one
// to fmt.Sprintf, so pass a reason built elsewhere as Reject("%s", reason).
func Reject(format string, args ...any) Status {
	return Status{Code: Unschedulable, Reasons: []string{sprintf(format, args...)}}
}

// RejectUnresolvable reports that the pod does not fit and that preempting
// other pods cannot change that. The reason is formatted as by Reject.
func RejectUnresolvable(format string, args ...any) Status {
	return Status{Code: UnschedulableAndUnresolvable, Reasons: []string{sprintf(format, args...)}}
}

// Errorf reports an internal error of the policy. The scheduler treats it
// like a trap: the policy's failurePolicy decides (Fail: the pod is
// Unschedulable with this reason; Ignore: the policy is skipped for the
// cycle). The reason is formatted as by Reject.
func Errorf(format string, args ...any) Status {
	return Status{Code: Error, Reasons: []string{sprintf(format, args...)}}
}

// SkipPoint tells the host that the policy has nothing to do at this
// extension point for this pod (from PreFilter: skip Filter for this cycle).
func SkipPoint() Status { return Status{Code: Skip} }

// sprintf is fmt.Sprintf, except that a format without args is returned as
// it is, without an allocation (so "100%%" stays "100%%": vet accepts it,
// but only fmt would turn it into "100%"). Every helper here that takes a
// format passes it on as (format, args...), the one form go vet recognises
// as a printf wrapper: with args passed as a slice instead, vet checked
// none of their calls.
func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
