// Package skew holds a scheduler build to the Kubernetes version-skew
// policy: kube-scheduler must not be newer than the kube-apiserver it talks
// to, and may be at most one minor older. Upstream kube-scheduler does not
// check; run against an older apiserver it waits, silently and for ever,
// for informers of APIs that apiserver does not serve. wasmsched builds
// check at start-up instead and refuse with an error that names the build
// to run.
package skew

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
)

// Minor is the Kubernetes minor this binary is built from, "1.37": the
// kube-scheduler and client-go it links.
const Minor = version.DefaultKubeBinaryVersion

// EnvCheck, set to "warn", turns a refusal into a logged warning: for an
// operator who knowingly runs outside the policy. Any other value, or none,
// refuses.
const EnvCheck = "WASMSCHED_SKEW_CHECK"

// Error is a skew the policy does not allow.
type Error struct {
	Scheduler string // this build's minor, "1.37"
	APIServer string // the apiserver's minor, "1.36"
	Reported  string // the apiserver's own version, "v1.36.4" or "v1.37.2 emulating 1.36"
}

func (e *Error) Error() string {
	s, _ := parse(e.Scheduler)
	a, _ := parse(e.APIServer)
	which := fmt.Sprintf("version skew: this kube-scheduler is built from Kubernetes %s and the kube-apiserver is %s (%s): ", e.Scheduler, e.APIServer, e.Reported)
	override := fmt.Sprintf(" (docs/compatibility.md), or set %s=warn to start anyway", EnvCheck)
	if s > a {
		return which + "a scheduler may be as new as the apiserver or one minor older, never newer; run the wasmsched build for " + e.APIServer + override
	}
	return which + fmt.Sprintf("a scheduler may be at most one minor older than the apiserver; run a wasmsched build for 1.%d or %s", a-1, e.APIServer) + override
}

// Check returns an *Error when a scheduler of this build may not talk to
// an apiserver that reports info, and nil when it may. An apiserver that
// emulates an older version (--emulated-version) serves that version's
// APIs, so its emulated minor is the one checked. A report without a
// usable 1.x minor (a development build) is an error of its own kind, not
// a skew.
func Check(info *apiversion.Info) error {
	return check(Minor, info)
}

func check(build string, info *apiversion.Info) error {
	major, minor, reported := info.Major, info.Minor, info.GitVersion
	if e := info.EmulationMajor + "." + digits(info.EmulationMinor); info.EmulationMajor != "" && e != major+"."+digits(minor) {
		major, minor = info.EmulationMajor, info.EmulationMinor
		reported += " emulating " + e
	}
	server := digits(major) + "." + digits(minor)
	a, ok := parse(server)
	if !ok {
		return fmt.Errorf("the kube-apiserver reports version %q (major %q, minor %q): no Kubernetes 1.x minor to check the version skew against", info.GitVersion, info.Major, info.Minor)
	}
	s, _ := parse(build)
	if a < s || a > s+1 {
		return &Error{Scheduler: build, APIServer: server, Reported: reported}
	}
	return nil
}

// Verify asks the apiserver for its version and checks it. A skew the
// policy does not allow is returned as an *Error unless EnvCheck is "warn";
// an apiserver that cannot say (unreachable, or a development build) is
// logged and allowed: the scheduler's own start-up reports an unreachable
// apiserver better.
func Verify(ctx context.Context, client discovery.ServerVersionInterface) error {
	logger := klog.FromContext(ctx)
	info, err := serverVersion(ctx, client)
	if err != nil {
		logger.Info("Cannot check the version skew: asking the kube-apiserver for its version failed", "err", err, "build", Minor)
		return nil
	}
	err = Check(info)
	var skewErr *Error
	switch {
	case err == nil:
		logger.V(2).Info("Version skew allowed", "build", Minor, "apiserver", info.GitVersion)
		return nil
	case !errors.As(err, &skewErr):
		logger.Info("Cannot check the version skew", "err", err, "build", Minor)
		return nil
	case os.Getenv(EnvCheck) == "warn":
		logger.Info("WARNING: starting outside the version-skew policy, as "+EnvCheck+"=warn asks", "err", err)
		return nil
	default:
		return err
	}
}

// askTimeout bounds the version request: the discovery client takes no
// context, and an apiserver that does not answer is the scheduler's own
// start-up's to report.
const askTimeout = 30 * time.Second

func serverVersion(ctx context.Context, client discovery.ServerVersionInterface) (*apiversion.Info, error) {
	type answer struct {
		info *apiversion.Info
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		info, err := client.ServerVersion()
		ch <- answer{info, err}
	}()
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	select {
	case a := <-ch:
		return a.info, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// parse returns the minor of "1.N", and false for anything else.
func parse(v string) (int, bool) {
	major, minor, ok := strings.Cut(v, ".")
	if !ok || major != "1" {
		return 0, false
	}
	n, err := strconv.Atoi(minor)
	return n, err == nil
}

// digits is the leading digits of s: providers report minors such as "37+".
func digits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
