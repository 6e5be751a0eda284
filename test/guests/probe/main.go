// Command probe is a test policy whose behaviour is chosen by its settings,
// so that one module exercises every extension point, every verdict and
// every way a guest can fail. It is built by the tests; it is not an example
// to copy.
//
// The hostile suite (test/e2e/hostile_test.go, cmd/wasmsched tests) loads
// many probes at once, each misbehaving at one point in one way, and only
// for pods carrying the label named by "when": the other pods are scheduled
// through the same policies untouched.
package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
	"github.com/wasmsched/wasmsched/guest"
)

type settings struct {
	// RejectLabel: Filter rejects nodes carrying this label.
	RejectLabel string `json:"rejectLabel"`
	// ScoreLabel: Score is the integer value of this node label.
	ScoreLabel string `json:"scoreLabel"`
	// PreferAnnotation: with ScoreLabel, a pod whose annotation of this
	// key is "low" scores 100 minus the label's value instead.
	PreferAnnotation string `json:"preferAnnotation"`
	// NeedAnnotation: Filter rejects every node for a pod without this
	// annotation.
	NeedAnnotation string `json:"needAnnotation"`
	// ScoreCount: Score returns how many times this instance's Score ran
	// (1 for the first call), so that a test sees which nodes were scored
	// again.
	ScoreCount bool `json:"scoreCount"`
	// Signature and Requeue are declared as given.
	Signature *guest.Signature `json:"signature"`
	Requeue   *guest.Requeue   `json:"requeue"`
	// SignAnnotation: the probe signs pods itself, by the value of this
	// annotation, and refuses pods without it.
	SignAnnotation string `json:"signAnnotation"`
	// ScorePods: Score is the number of pod summaries on the node.
	ScorePods bool `json:"scorePods"`
	// ScoreFree: Score is the node's free amount of this resource
	// ("cpu" in millicores, "pods", ...).
	ScoreFree string `json:"scoreFree"`
	// Normalize applies MinMaxNormalize.
	Normalize bool `json:"normalize"`
	// RestrictTo: PreFilter narrows the nodes to these.
	RestrictTo []string `json:"restrictTo"`
	// PreFilterReject: PreFilter rejects the pod with this reason.
	PreFilterReject string `json:"preFilterReject"`
	// RejectNamespaceLabel: PreFilter rejects a pod whose Namespace
	// carries this label (the probe must declare v1/namespaces in
	// Context).
	RejectNamespaceLabel string `json:"rejectNamespaceLabel"`
	// Permit: "allow" (default), "wait", "reject", or "gang": wait until
	// GangSize pods (this one included) are waiting, then allow them all.
	Permit   string `json:"permit"`
	GangSize int    `json:"gangSize"`
	// CountNodes: PreFilter counts resident nodes into the cycle state and
	// Score returns that count.
	CountNodes bool `json:"countNodes"`

	// At is the point where the probe misbehaves: "settings" (wasmsched_init),
	// "prefilter", "filter", "score", "normalize", "postfilter", "reserve",
	// "permit", "unreserve", "prebind" or "postbind". The last five points
	// are implemented only when At names them. To reach "postfilter" the
	// probe's Filter rejects every node of a misbehaving pod; to reach
	// "unreserve" its Permit rejects the pod.
	At string `json:"at"`
	// How it misbehaves:
	//   panic      a Go panic (the instance traps)
	//   loop       spins forever
	//   sleep      sleeps 5s, past any call deadline
	//   grow       allocates until memory runs out
	//   zero       returns the invalid status code 0
	//   code99     returns the invalid status code 99
	//   bigscore   (score) a score that does not fit in an int32
	//   outofrange (score) a score of 1000, outside 0..100
	//   bigresult  rejects with 65 MiB of reasons, over the ABI's 64 MiB
	//   hugereason rejects with one reason of 4 MiB
	//   manyreasons (filter) rejects each node with 16 distinct reasons
	//              of 1000 bytes that name the node
	//   wasi       tries files, environment variables and sockets, and
	//              rejects with what it found (every attempt should fail)
	//   bulkcopy   copies 32 MiB with Go's copy (one memory.copy), forever
	//   stderrflood writes to stderr with one fd_write of a million
	//              buffers of 16 MiB each, forever
	//   recurse    recurses without end
	How string `json:"how"`
	// Every: misbehave only on every n-th call (0 or 1: always). Calls are
	// counted per instance and only for pods that When selects.
	Every int `json:"every"`
	// When: misbehave only in cycles whose pod has this label,
	// "key=value" (empty: always).
	When string `json:"when"`

	// Context declares the kinds of cluster object the probe reads
	// ("v1/namespaces", "group/version/resource"), NamespaceUsage and
	// UsageLabelKeys the tenant usage: the host then syncs them.
	Context        []string `json:"context"`
	NamespaceUsage bool     `json:"namespaceUsage"`
	UsageLabelKeys []string `json:"usageLabelKeys"`
	// ShowContext: PreFilter rejects the pod with one reason listing the
	// resident objects (kind index:namespace/name) and tenant usage
	// (key=tenant:milliCPU/pods) it sees.
	ShowContext bool `json:"showContext"`
	// SliceDriver: Filter passes only the nodes for which a resident DRA
	// ResourceSlice of this driver lists devices (spec.nodeName names the
	// node, or spec.allNodes), and Score is the number of those devices.
	// The probe must declare resource.k8s.io/v1/resourceslices in Context.
	SliceDriver string `json:"sliceDriver"`
	// DeviceClass: PreFilter rejects the pod while no DeviceClass of this
	// name is resident (resource.k8s.io/v1/deviceclasses in Context).
	DeviceClass string `json:"deviceClass"`

	WantsPods     bool `json:"wantsPods"`
	WantsAllNodes bool `json:"wantsAllNodes"`
	Reject        bool `json:"rejectSettings"`
}

var (
	s     settings
	calls = map[string]int{}
	sink  [][]byte
)

// selected reports whether the cycle's pod is one the probe misbehaves for.
func selected(c *guest.Cycle) bool {
	if s.When == "" {
		return true
	}
	if c == nil || c.Pod == nil {
		return false
	}
	k, v, _ := strings.Cut(s.When, "=")
	got, ok := c.Pod.Label(k)
	return ok && got == v
}

// misbehave acts out the configured failure at point. It returns the
// status to answer instead of the normal one, or ok false to answer
// normally.
func misbehave(point string, c *guest.Cycle) (st guest.Status, ok bool) {
	if s.At != point || !selected(c) {
		return guest.Status{}, false
	}
	calls[point]++
	if s.Every > 1 && calls[point]%s.Every != 0 {
		return guest.Status{}, false
	}
	switch s.How {
	case "panic":
		panic("probe: deliberate panic in " + point)
	case "loop":
		for {
			time.Sleep(0)
		}
	case "sleep":
		time.Sleep(5 * time.Second)
		return guest.Status{}, false
	case "grow":
		// Doubling, so that any limit is reached in a few steps, well
		// within the call deadline.
		for n := 1 << 20; ; n *= 2 {
			sink = append(sink, make([]byte, n))
		}
	case "zero":
		return guest.Status{}, true
	case "code99":
		return guest.Status{Code: 99, Reasons: []string{"probe: code 99"}}, true
	case "bigresult":
		mib := strings.Repeat("x", 1<<20)
		reasons := make([]string, 65)
		for i := range reasons {
			reasons[i] = mib
		}
		return guest.Status{Code: guest.Unschedulable, Reasons: reasons}, true
	case "hugereason":
		return guest.Status{Code: guest.Unschedulable, Reasons: []string{"probe: huge " + strings.Repeat("x", 4<<20)}}, true
	case "wasi":
		return guest.Reject("probe: wasi: %s", strings.Join(tryWASI(), "; ")), true
	case "bulkcopy":
		a, b := make([]byte, 32<<20), make([]byte, 32<<20)
		for i := 0; ; i++ {
			copy(a, b)
			b[i%len(b)]++
		}
	case "stderrflood":
		buf := make([]byte, 16<<20)
		for {
			floodStderr(buf, 1_000_000)
		}
	case "recurse":
		return guest.Reject("probe: recursed %d deep", recurse(0)), true
	}
	return guest.Status{}, false
}

// tryWASI attempts what the sandbox must refuse and describes each outcome.
func tryWASI() []string {
	var out []string
	for _, path := range []string{"/etc/passwd", ".", "/"} {
		f, err := os.Open(path)
		if err == nil {
			f.Close()
			out = append(out, "open "+path+": OPENED")
			continue
		}
		out = append(out, "open "+path+": denied")
	}
	if err := os.WriteFile("/tmp/probe", []byte("x"), 0o644); err == nil {
		out = append(out, "write /tmp/probe: WRITTEN")
	} else {
		out = append(out, "write /tmp/probe: denied")
	}
	if env := os.Environ(); len(env) > 0 {
		out = append(out, "environ: "+strconv.Itoa(len(env))+" VARIABLES")
	} else {
		out = append(out, "environ: empty")
	}
	if len(os.Args) > 1 {
		out = append(out, "args: "+strconv.Itoa(len(os.Args))+" ARGUMENTS")
	} else {
		out = append(out, "args: none")
	}
	// Go's net package on wasip1 simulates Dial and Listen inside the
	// module; the only way to a host socket is one the host preopened,
	// which wazero hands out as a file descriptor after the standard ones.
	for fd := uintptr(3); fd <= 5; fd++ {
		if ln, err := net.FileListener(os.NewFile(fd, "socket")); err == nil {
			ln.Close()
			out = append(out, "socket fd "+strconv.Itoa(int(fd))+": LISTENING")
		} else {
			out = append(out, "socket fd "+strconv.Itoa(int(fd))+": denied")
		}
	}
	return out
}

// sliceDevices counts the devices that resident ResourceSlices of the
// SliceDriver list for node.
func sliceDevices(c *guest.Cycle, node string) int {
	n := 0
	for _, rs := range c.ResourceSlices() {
		if rs.Driver() == s.SliceDriver && (rs.NodeName() == node || rs.AllNodes()) {
			n += len(rs.Devices())
		}
	}
	return n
}

// showContext lists what the cycle sees of the cluster context.
func showContext(c *guest.Cycle, p *guest.Policy) string {
	var parts []string
	for i, k := range p.Context {
		for _, o := range c.Objects(k) {
			parts = append(parts, strconv.Itoa(i)+":"+o.Namespace()+"/"+o.Name())
		}
	}
	keys := p.UsageLabelKeys
	if p.NamespaceUsage {
		keys = append([]string{""}, keys...)
	}
	for _, key := range keys {
		c.EachTenant(key, func(tenant string, used *abiv1.Resources) bool {
			parts = append(parts, key+"="+tenant+":"+strconv.FormatInt(used.MilliCpu, 10)+"/"+strconv.FormatInt(used.Pods, 10))
			return true
		})
	}
	return "context: " + strings.Join(parts, " ")
}

func policy() *guest.Policy {
	p := &guest.Policy{Name: "probe"}
	p.Settings = func(raw []byte) error {
		if err := guest.ParseSettings(raw, &s); err != nil {
			return err
		}
		if s.Reject {
			return errorString("probe: settings rejected on request")
		}
		if st, ok := misbehave("settings", nil); ok {
			return errorString("probe: settings: " + strings.Join(st.Reasons, "; "))
		}
		p.WantsPods = s.WantsPods || s.ScorePods
		p.WantsAllNodes = s.WantsAllNodes || s.CountNodes
		for _, k := range s.Context {
			parts := strings.Split(k, "/")
			if len(parts) == 2 {
				parts = append([]string{""}, parts...)
			}
			if len(parts) != 3 {
				return errorString("probe: context kind " + k + ": want group/version/resource")
			}
			p.Context = append(p.Context, guest.Kind{Group: parts[0], Version: parts[1], Resource: parts[2]})
		}
		p.NamespaceUsage, p.UsageLabelKeys = s.NamespaceUsage, s.UsageLabelKeys
		p.Signature, p.Requeue = s.Signature, s.Requeue
		if s.SignAnnotation != "" {
			p.Sign = func(pod *guest.Pod) ([]byte, bool) {
				v, ok := pod.Annotation(s.SignAnnotation)
				return []byte(v), ok
			}
		}
		if s.Normalize || s.At == "normalize" {
			p.NormalizeScore = func(c *guest.Cycle, scores []guest.NodeScore) guest.Status {
				if st, ok := misbehave("normalize", c); ok {
					return st
				}
				if s.Normalize {
					return guest.MinMaxNormalize(c, scores)
				}
				return guest.OK()
			}
		}
		switch s.At {
		case "postfilter":
			p.PostFilter = func(c *guest.Cycle, _ []guest.NodeStatus) (string, guest.Status) {
				if st, ok := misbehave("postfilter", c); ok {
					return "", st
				}
				return "", guest.Status{Code: guest.Unschedulable}
			}
		case "unreserve":
			p.Unreserve = func(c *guest.Cycle, _ *guest.NodeInfo, _ []guest.WaitingPod) []guest.WaitingPodAction {
				misbehave("unreserve", c)
				return nil
			}
		case "prebind":
			p.PreBind = func(c *guest.Cycle, _ *guest.NodeInfo) guest.Status {
				if st, ok := misbehave("prebind", c); ok {
					return st
				}
				return guest.OK()
			}
		case "postbind":
			p.PostBind = func(c *guest.Cycle, _ *guest.NodeInfo) { misbehave("postbind", c) }
		}
		return nil
	}
	p.PreFilter = func(c *guest.Cycle) guest.Status {
		if st, ok := misbehave("prefilter", c); ok {
			return st
		}
		if s.PreFilterReject != "" {
			return guest.Reject("%s", s.PreFilterReject)
		}
		if s.ShowContext {
			return guest.Reject("%s", showContext(c, p))
		}
		if s.RejectNamespaceLabel != "" {
			ns := c.Namespace(c.Pod.Namespace())
			if ns == nil {
				return guest.Reject("probe: namespace %s not found", c.Pod.Namespace())
			}
			if v, ok := ns.Label(s.RejectNamespaceLabel); ok {
				return guest.Reject("probe: namespace %s has label %s=%s", ns.Name(), s.RejectNamespaceLabel, v)
			}
		}
		if s.DeviceClass != "" && c.DeviceClass(s.DeviceClass) == nil {
			return guest.Reject("probe: no DeviceClass %s", s.DeviceClass)
		}
		if len(s.RestrictTo) > 0 {
			c.RestrictNodes(s.RestrictTo...)
		}
		if s.CountNodes {
			n := 0
			c.EachNode(func(*guest.NodeInfo) bool { n++; return true })
			c.State = n
		}
		return guest.OK()
	}
	p.Filter = func(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
		if st, ok := misbehave("filter", c); ok {
			return st
		}
		if s.At == "postfilter" && selected(c) {
			return guest.Reject("probe: no node, so that PostFilter runs")
		}
		if s.At == "filter" && s.How == "manyreasons" && selected(c) {
			return manyReasons(n.Name())
		}
		if s.SliceDriver != "" && sliceDevices(c, n.Name()) == 0 {
			return guest.Reject("probe: no ResourceSlice of driver %s lists devices for node %s", s.SliceDriver, n.Name())
		}
		if s.NeedAnnotation != "" {
			if _, ok := c.Pod.Annotation(s.NeedAnnotation); !ok {
				return guest.Reject("probe: pod has no annotation %s", s.NeedAnnotation)
			}
		}
		if s.RejectLabel != "" {
			if _, ok := n.Label(s.RejectLabel); ok {
				return guest.Reject("probe: node %s has label %s", n.Name(), s.RejectLabel)
			}
		}
		return guest.OK()
	}
	p.Score = func(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) {
		if s.At == "score" && selected(c) {
			switch s.How {
			case "bigscore":
				return 1 << 40, guest.OK()
			case "outofrange":
				return 1000, guest.OK()
			}
		}
		if st, ok := misbehave("score", c); ok {
			return 0, st
		}
		switch {
		case s.ScoreCount:
			scoreCalls++
			return scoreCalls, guest.OK()
		case s.CountNodes:
			return int64(c.State.(int)), guest.OK()
		case s.ScorePods:
			return int64(len(n.Pods())), guest.OK()
		case s.SliceDriver != "":
			return min(100, int64(sliceDevices(c, n.Name()))), guest.OK()
		case s.ScoreFree != "":
			return n.Free(s.ScoreFree), guest.OK()
		case s.ScoreLabel != "":
			v, _ := n.Label(s.ScoreLabel)
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, guest.Errorf("probe: label %s=%q is not an integer", s.ScoreLabel, v)
			}
			if v, _ := c.Pod.Annotation(s.PreferAnnotation); s.PreferAnnotation != "" && v == "low" {
				return 100 - i, guest.OK()
			}
			return i, guest.OK()
		}
		return 0, guest.OK()
	}
	p.Reserve = func(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
		if st, ok := misbehave("reserve", c); ok {
			return st
		}
		return guest.OK()
	}
	p.Permit = func(c *guest.Cycle, n *guest.NodeInfo, waiting []guest.WaitingPod) guest.PermitResult {
		if st, ok := misbehave("permit", c); ok {
			return guest.PermitResult{Status: st}
		}
		if s.At == "unreserve" && selected(c) {
			return guest.PermitResult{Status: guest.Reject("probe: rejected at Permit, so that Unreserve runs")}
		}
		switch s.Permit {
		case "wait":
			return guest.PermitResult{Status: guest.Status{Code: guest.Wait, Reasons: []string{"probe: waiting"}}, Timeout: 3 * time.Second}
		case "reject":
			return guest.PermitResult{Status: guest.Reject("probe: permit rejected on %s", n.Name())}
		case "gang":
			if len(waiting)+1 < s.GangSize {
				return guest.PermitResult{Status: guest.Status{Code: guest.Wait, Reasons: []string{"probe: waiting for the gang"}}, Timeout: 30 * time.Second}
			}
			r := guest.PermitResult{Status: guest.OK()}
			for _, w := range waiting {
				r.Actions = append(r.Actions, guest.WaitingPodAction{UID: w.UID(), Allow: true})
			}
			return r
		}
		return guest.PermitResult{Status: guest.OK()}
	}
	return p
}

// recurse never returns; its frame holds a little state so that the
// compiler keeps it a real call.
//
//go:noinline
func recurse(n int) int {
	var pad [8]int
	pad[n%8] = n
	return recurse(n+1) + pad[(n+3)%8]
}

// manyReasons rejects node with 16 distinct reasons of 1000 bytes each,
// "probe: node <node> reason 00: xxx...".
func manyReasons(node string) guest.Status {
	reasons := make([]string, 16)
	for i := range reasons {
		r := "probe: node " + node + " reason " + strconv.Itoa(i/10) + strconv.Itoa(i%10) + ": "
		reasons[i] = r + strings.Repeat("x", max(0, 1000-len(r)))
	}
	return guest.Status{Code: guest.Unschedulable, Reasons: reasons}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// scoreCalls counts Score calls for ScoreCount.
var scoreCalls int64

func init() { guest.Register(policy()) }

func main() {}
