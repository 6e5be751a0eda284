package guest

import (
	"encoding/binary"
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
