package guest

// Log levels understood by the host; they map to klog's Info, V(4) and
// Error.
const (
	levelInfo  = 0
	levelDebug = 4
	levelError = 8
)

// Logf writes an informational line to the scheduler's log, tagged with the
// operator's name for the policy. Logging from Filter or Score runs once per node:
// prefer Debugf there. The line is formatted as Reject formats a reason.
func Logf(format string, args ...any) { hostLog(levelInfo, sprintf(format, args...)) }

// Debugf writes a line visible at the scheduler's -v=4 and above, formatted
// as by Logf.
func Debugf(format string, args ...any) { hostLog(levelDebug, sprintf(format, args...)) }

// Errorlogf writes an error line to the scheduler's log, formatted as by
// Logf.
func Errorlogf(format string, args ...any) { hostLog(levelError, sprintf(format, args...)) }
