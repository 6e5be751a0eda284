package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	abiv1 "github.com/wasmsched/wasmsched/abi/v1"
)

// fuzzAnswers lays out what testdata/answers.wat returns: each export
// answers the value stored at a fixed address of its memory.
type fuzzAnswers struct {
	result, filter, score uint64 // at 0, 8, 16
	code, buffer          uint32 // at 24, 28
}

// payloadAt is where the fuzz test writes the bytes a result may point to.
const payloadAt = 1024

// FuzzGuestAnswers feeds the host every answer a guest can give: status
// codes, Filter and Score words, result addresses and lengths, and the
// bytes found there (a Result or a PolicyInfo, or garbage). Whatever the
// guest answers, the host must not panic, must return only valid codes,
// must turn every bad answer into a *CallError that names the policy and
// the call, must discard the instance after it, and must bound the reasons
// it passes on.
func FuzzGuestAnswers(f *testing.F) {
	wasm, err := os.ReadFile(filepath.Join("testdata", "answers.wasm"))
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	m, err := Compile(ctx, wasm, Config{Name: "fuzz", MemoryLimit: MinMemoryLimit})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close(ctx) })

	result := func(msg marshaler) []byte { return Marshal(msg) }
	ok := uint64(abiv1.Code_CODE_SUCCESS) << 32
	seed := func(a fuzzAnswers, payload []byte, point int32) {
		var b [32]byte
		binary.LittleEndian.PutUint64(b[0:], a.result)
		binary.LittleEndian.PutUint64(b[8:], a.filter)
		binary.LittleEndian.PutUint64(b[16:], a.score)
		binary.LittleEndian.PutUint32(b[24:], a.code)
		binary.LittleEndian.PutUint32(b[28:], a.buffer)
		f.Add(b[:], payload, point)
	}
	at := func(p []byte) uint64 { return uint64(payloadAt)<<32 | uint64(len(p)) }
	info := result(&abiv1.PolicyInfo{Code: abiv1.Code_CODE_SUCCESS, AbiVersion: 1, Points: 1<<2 | 1<<5})
	seed(fuzzAnswers{result: at(info), filter: ok, score: ok | 42, code: 1, buffer: 4096}, info, 7)
	reject := result(&abiv1.Result{Code: abiv1.Code_CODE_UNSCHEDULABLE, Reasons: []string{"no", strings.Repeat("é", 700)}})
	seed(fuzzAnswers{result: at(reject), filter: 3<<32 | 7, score: 2 << 32, code: 3, buffer: 4096}, reject, 9)
	many := &abiv1.Result{Code: abiv1.Code_CODE_WAIT, WaitTimeoutMillis: -1, NominatedNodeName: "n"}
	for range 40 {
		many.Reasons = append(many.Reasons, "r")
		many.Actions = append(many.Actions, &abiv1.WaitingPodAction{Uid: "u", Reason: strings.Repeat("x", 2000)})
	}
	manyB := result(many)
	seed(fuzzAnswers{result: at(manyB), filter: 5 << 32, score: 1<<32 | 0xffffffff, code: 5, buffer: 0}, manyB, 6)
	seed(fuzzAnswers{result: 0xffffffff_ffffffff, filter: 0, score: 99 << 32, code: 0, buffer: 0xfffffff0}, []byte{0xff, 0xff, 0xff}, -1)
	seed(fuzzAnswers{result: uint64(payloadAt)<<32 | MaxMessage + 1, filter: 8 << 32, code: 8, buffer: 131072 - 3}, nil, 4)

	f.Fuzz(func(t *testing.T, answers, payload []byte, point int32) {
		var a fuzzAnswers
		var b [32]byte
		copy(b[:], answers)
		a.result = binary.LittleEndian.Uint64(b[0:])
		a.filter = binary.LittleEndian.Uint64(b[8:])
		a.score = binary.LittleEndian.Uint64(b[16:])
		a.code = binary.LittleEndian.Uint32(b[24:])
		a.buffer = binary.LittleEndian.Uint32(b[28:])

		in, err := m.NewInstance(ctx)
		if err != nil {
			t.Fatalf("NewInstance: %v", err)
		}
		defer in.Close(ctx)
		if len(payload) > 65536 {
			payload = payload[:65536]
		}
		if !in.mem.Write(0, b[:]) || !in.mem.Write(payloadAt, payload) {
			t.Fatal("cannot write the answers into guest memory")
		}
		// Requests are written at a.buffer and may overwrite the answers:
		// rewrite them before each call.
		rewrite := func() {
			in.mem.Write(0, b[:])
			in.mem.Write(payloadAt, payload)
		}

		pi, err := in.Init("fuzz", []byte(`{"a":1}`))
		check(t, in, "init", err)
		if err == nil {
			if pi.Code != abiv1.Code_CODE_SUCCESS || pi.AbiVersion != ABIVersion {
				t.Fatalf("Init accepted %v", pi)
			}
			checkReasons(t, pi.Reasons)
		}
		rewrite()
		code, _, err := in.Filter(3)
		check(t, in, "filter", err)
		checkCode(t, "filter", code, err)
		rewrite()
		r, err := in.Result("filter")
		check(t, in, "filter", err)
		if err == nil {
			checkReasons(t, r.Reasons)
			for _, act := range r.Actions {
				if act != nil && len(act.Reason) > MaxReasonBytes+32 {
					t.Fatalf("action reason of %d bytes passed through", len(act.Reason))
				}
			}
		}
		rewrite()
		_, code, err = in.Score(3)
		check(t, in, "score", err)
		checkCode(t, "score", code, err)
		rewrite()
		hs := []int32{3, 4, 5}
		scores, code, bad, err := in.ScoreNodes(hs)
		check(t, in, "score_nodes", err)
		checkCode(t, "score_nodes", code, err)
		switch {
		case err != nil:
		case code == abiv1.Code_CODE_SUCCESS && (len(scores) != len(hs) || bad != -1):
			t.Fatalf("score_nodes: success with %d scores for %d nodes, bad %d", len(scores), len(hs), bad)
		case code != abiv1.Code_CODE_SUCCESS && (bad < 0 || bad > len(hs)):
			t.Fatalf("score_nodes: %v at node %d of %d", code, bad, len(hs))
		}
		rewrite()
		code, _, err = in.Cycle([]byte("pod"))
		check(t, in, "cycle", err)
		checkCode(t, "cycle", code, err)
		rewrite()
		pt := abiv1.Point(point)
		code, err = in.Call(pt, payload)
		check(t, in, PointName(pt), err)
		checkCode(t, PointName(pt), code, err)
	})
}

// check asserts the contract of a failed call: a *CallError naming the
// policy, its version and the call, and a broken instance after any
// failure but a refusal.
func check(t *testing.T, in *Instance, call string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %T %v is not a *CallError", call, err, err)
	}
	if ce.Policy != "fuzz" || ce.Version != in.m.Version() || !strings.HasPrefix(ce.Call, call) {
		t.Fatalf("%s: error names policy %q version %q call %q", call, ce.Policy, ce.Version, ce.Call)
	}
	if !strings.HasPrefix(err.Error(), "policy fuzz@"+in.m.Version()+": "+call) {
		t.Fatalf("%s: error %q does not start with the policy and the call", call, err)
	}
	switch ce.Kind {
	case KindRejected, KindABI:
	case KindBroken, KindTrap, KindTimeout, KindMemory, KindInvalid:
		if !in.Broken() {
			t.Fatalf("%s: %s error %q left the instance in use", call, ce.Kind, err)
		}
	default:
		t.Fatalf("%s: unexpected kind %s: %v", call, ce.Kind, err)
	}
}

func checkCode(t *testing.T, call string, code abiv1.Code, err error) {
	t.Helper()
	if err == nil && (code < abiv1.Code_CODE_SUCCESS || code > abiv1.Code_CODE_PENDING) {
		t.Fatalf("%s: invalid code %d accepted", call, code)
	}
	if err != nil && code != abiv1.Code_CODE_INVALID {
		t.Fatalf("%s: failed call returned code %d", call, code)
	}
}

func checkReasons(t *testing.T, rs []string) {
	t.Helper()
	if len(rs) > MaxReasons {
		t.Fatalf("%d reasons passed through, want at most %d", len(rs), MaxReasons)
	}
	for _, r := range rs {
		if len(r) > MaxReasonBytes+32 {
			t.Fatalf("a reason of %d bytes passed through", len(r))
		}
	}
}

// The cut never splits a UTF-8 sequence and says how much it cut.
func TestClipReasons(t *testing.T) {
	long := strings.Repeat("é", MaxReasonBytes) // 2 bytes each
	var many []string
	for range MaxReasons + 5 {
		many = append(many, "r")
	}
	got := clipReasons(append([]string{long}, many...))
	if len(got) != MaxReasons {
		t.Fatalf("%d reasons, want %d", len(got), MaxReasons)
	}
	if !utf8.ValidString(got[0]) || !strings.HasSuffix(got[0], "... (1024 bytes cut)") || len(got[0]) > MaxReasonBytes+32 {
		t.Fatalf("first reason cut to %d bytes ending %q", len(got[0]), got[0][len(got[0])-30:])
	}
	if last := got[len(got)-1]; last != "(7 more reasons cut)" {
		t.Fatalf("last reason %q", last)
	}
	short := []string{"a", "b"}
	if got := clipReasons(short); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("short reasons changed: %q", got)
	}
}
