// Command probe is a test policy whose behaviour is chosen by its settings,
// so that one module exercises every extension point, every verdict and
// every way a guest can fail. It is built by the tests; it is not an example
// to copy.
package main

import (
	"strconv"
	"time"

	"github.com/wasmsched/wasmsched/guest"
)

type settings struct {
	// RejectLabel: Filter rejects nodes carrying this label.
	RejectLabel string `json:"rejectLabel"`
	// ScoreLabel: Score is the integer value of this node label.
	ScoreLabel string `json:"scoreLabel"`
	// ScorePods: Score is the number of pod summaries on the node.
	ScorePods bool `json:"scorePods"`
	// Normalize applies MinMaxNormalize.
	Normalize bool `json:"normalize"`
	// RestrictTo: PreFilter narrows the nodes to these.
	RestrictTo []string `json:"restrictTo"`
	// PreFilterReject: PreFilter rejects the pod with this reason.
	PreFilterReject string `json:"preFilterReject"`
	// Permit: "allow" (default), "wait", "reject", or "gang": wait until
	// GangSize pods (this one included) are waiting, then allow them all.
	Permit   string `json:"permit"`
	GangSize int    `json:"gangSize"`
	// CountNodes: PreFilter counts resident nodes into the cycle state and
	// Score returns that count.
	CountNodes bool `json:"countNodes"`
	// Misbehave at one point ("settings", "prefilter", "filter", "score",
	// "permit", "reserve") in one way: "panic", "loop", "grow", "zero"
	// (return the invalid code 0), "bigscore".
	At  string `json:"at"`
	How string `json:"how"`
	// Every: misbehave only on every n-th call (0 or 1: always).
	Every int `json:"every"`

	WantsPods     bool `json:"wantsPods"`
	WantsAllNodes bool `json:"wantsAllNodes"`
	Reject        bool `json:"rejectSettings"`
}

var (
	s     settings
	calls = map[string]int{}
	sink  [][]byte
)

// misbehave acts out the configured failure at point, returning true when
// the caller should return the invalid zero status.
func misbehave(point string) bool {
	if s.At != point {
		return false
	}
	calls[point]++
	if s.Every > 1 && calls[point]%s.Every != 0 {
		return false
	}
	switch s.How {
	case "panic":
		panic("probe: deliberate panic in " + point)
	case "loop":
		for {
			time.Sleep(0)
		}
	case "grow":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "zero":
		return true
	}
	return false
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
		misbehave("settings")
		p.WantsPods = s.WantsPods || s.ScorePods
		p.WantsAllNodes = s.WantsAllNodes || s.CountNodes
		if s.Normalize {
			p.NormalizeScore = guest.MinMaxNormalize
		}
		return nil
	}
	p.PreFilter = func(c *guest.Cycle) guest.Status {
		if misbehave("prefilter") {
			return guest.Status{}
		}
		if s.PreFilterReject != "" {
			return guest.Reject("%s", s.PreFilterReject)
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
		if misbehave("filter") {
			return guest.Status{}
		}
		if s.RejectLabel != "" {
			if _, ok := n.Label(s.RejectLabel); ok {
				return guest.Reject("probe: node %s has label %s", n.Name(), s.RejectLabel)
			}
		}
		return guest.OK()
	}
	p.Score = func(c *guest.Cycle, n *guest.NodeInfo) (int64, guest.Status) {
		if misbehave("score") {
			return 0, guest.Status{}
		}
		if s.At == "score" && s.How == "bigscore" {
			return 1 << 40, guest.OK()
		}
		switch {
		case s.CountNodes:
			return int64(c.State.(int)), guest.OK()
		case s.ScorePods:
			return int64(len(n.Pods())), guest.OK()
		case s.ScoreLabel != "":
			v, _ := n.Label(s.ScoreLabel)
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, guest.Errorf("probe: label %s=%q is not an integer", s.ScoreLabel, v)
			}
			return i, guest.OK()
		}
		return 0, guest.OK()
	}
	p.Reserve = func(c *guest.Cycle, n *guest.NodeInfo) guest.Status {
		if misbehave("reserve") {
			return guest.Status{}
		}
		return guest.OK()
	}
	p.Permit = func(c *guest.Cycle, n *guest.NodeInfo, waiting []guest.WaitingPod) guest.PermitResult {
		if misbehave("permit") {
			return guest.PermitResult{}
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
				r.Actions = append(r.Actions, guest.WaitingPodAction{UID: w.GetUid(), Allow: true})
			}
			return r
		}
		return guest.PermitResult{Status: guest.OK()}
	}
	return p
}

type errorString string

func (e errorString) Error() string { return string(e) }

func init() { guest.Register(policy()) }

func main() {}
