package guest

import (
	"encoding/binary"
	"slices"
	"testing"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// TestSkipNormalizeScore: a pod whose raw scores PreFilter called final
// is flagged so in wasmsched_cycle's answer, only to a host that reads the
// flags, and NormalizeScore does not run for it even when the host asks;
// the next pod's scores are normalised again.
func TestSkipNormalizeScore(t *testing.T) {
	defer func() { inst = &instance{} }()
	normalized := 0
	policy := &Policy{
		Name: "final",
		PreFilter: func(c *Cycle) Status {
			if _, ok := c.Pod.Label("final"); ok {
				c.SkipNormalizeScore()
			}
			return OK()
		},
		Score: func(*Cycle, *NodeInfo) (int64, Status) { return 7, OK() },
		NormalizeScore: func(_ *Cycle, scores []NodeScore) Status {
			normalized++
			for i := range scores {
				scores[i].Score = 100
			}
			return OK()
		},
	}
	final := &abiv1.Pod{Name: "a", Uid: "a", Labels: []*abiv1.KeyValue{{Key: "final"}}}
	plain := &abiv1.Pod{Name: "b", Uid: "b"}
	flag := uint32(abiv1.CycleFlag_CYCLE_FLAG_SCORES_FINAL)
	for _, hostReadsFlags := range []bool{false, true} {
		inst = &instance{policy: policy}
		if code := inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion, CycleFlags: hostReadsFlags})); code != uint32(Success) {
			t.Fatalf("init answered %d", code)
		}
		if code := inst.sync(sendMsg(t, &abiv1.NodeSync{Upserts: []*abiv1.NodeInfo{{Handle: 0, Generation: 1, Node: &abiv1.Node{Name: "n1"}}}})); code != uint32(Success) {
			t.Fatalf("sync answered %d", code)
		}
		for i, tc := range []struct {
			pod       *abiv1.Pod
			flagged   bool
			want      int64
			normalize int
		}{{final, hostReadsFlags, 7, 0}, {plain, false, 100, 1}} {
			normalized = 0
			got := inst.startCycle(sendMsg(t, &abiv1.CycleRequest{Cycle: uint64(i + 1), Pod: tc.pod}))
			want := uint32(Success)
			if tc.flagged {
				want |= flag
			}
			if hostReadsFlags {
				want |= uint32(abiv1.CycleFlag_CYCLE_FLAG_NO_DETAIL)
			}
			if got != want {
				t.Fatalf("host reads flags %v, pod %s: cycle answered %#x, want %#x", hostReadsFlags, tc.pod.Name, got, want)
			}
			// The host asks for NormalizeScore anyway (one that does not
			// read the flags): handle 0 with raw score 7.
			b := inst.buffer(12)
			binary.LittleEndian.PutUint32(b, 0)
			binary.LittleEndian.PutUint64(b[4:], 7)
			if code, _ := inst.normalizeScores(1); code != Success {
				t.Fatalf("normalize_scores answered %d", code)
			}
			if v := int64(binary.LittleEndian.Uint64(inst.scores)); v != tc.want || normalized != tc.normalize {
				t.Fatalf("host reads flags %v, pod %s: score %d after %d NormalizeScore calls, want %d after %d", hostReadsFlags, tc.pod.Name, v, normalized, tc.want, tc.normalize)
			}
		}
	}
}

// TestCycleNoDetail: a host that reads the flags is told when PreFilter's
// Result would say nothing beyond the code (no reasons, no node subset),
// whatever the code, and is never told so when there is detail to fetch,
// which the Result then holds.
func TestCycleNoDetail(t *testing.T) {
	defer func() { inst = &instance{} }()
	noDetail := uint32(abiv1.CycleFlag_CYCLE_FLAG_NO_DETAIL)
	for _, tc := range []struct {
		name     string
		status   Status
		restrict []string
		flagged  bool
		reasons  []string
	}{
		{name: "ok", status: OK(), flagged: true},
		{name: "skip", status: SkipPoint(), flagged: true},
		{name: "rejected without reasons", status: Status{Code: Unschedulable}, flagged: true},
		{name: "rejected", status: Status{Code: Unschedulable, Reasons: []string{"no"}}, reasons: []string{"no"}},
		{name: "ok with a reason", status: Status{Code: Success, Reasons: []string{"note"}}, reasons: []string{"note"}},
		{name: "restricted", status: OK(), restrict: []string{"n1"}},
	} {
		for _, hostReadsFlags := range []bool{false, true} {
			inst = &instance{policy: &Policy{Name: "detail", PreFilter: func(c *Cycle) Status {
				if tc.restrict != nil {
					c.RestrictNodes(tc.restrict...)
				}
				return tc.status
			}}}
			if code := inst.init(sendMsg(t, &abiv1.InitRequest{HostAbiVersion: ABIVersion, CycleFlags: hostReadsFlags})); code != uint32(Success) {
				t.Fatalf("init answered %d", code)
			}
			got := inst.startCycle(sendMsg(t, &abiv1.CycleRequest{Cycle: 1, Pod: &abiv1.Pod{Name: "p", Uid: "p"}}))
			want := uint32(tc.status.Code)
			if tc.flagged && hostReadsFlags {
				want |= noDetail
			}
			if got != want {
				t.Errorf("%s, host reads flags %v: cycle answered %#x, want %#x", tc.name, hostReadsFlags, got, want)
			}
			var r abiv1.Result
			if err := r.UnmarshalVT(inst.marshalResult()); err != nil {
				t.Fatalf("%s: result: %v", tc.name, err)
			}
			if !slices.Equal(r.Reasons, tc.reasons) || r.NodeSubset != (tc.restrict != nil) || !slices.Equal(r.NodeNames, tc.restrict) {
				t.Errorf("%s: result %+v, want reasons %q and node subset %q", tc.name, &r, tc.reasons, tc.restrict)
			}
		}
	}
}
