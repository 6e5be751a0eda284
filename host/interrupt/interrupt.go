// Package interrupt rewrites a WebAssembly module so that the host can stop a
// running call, bound its call stack and its tables, and so that the Go
// runtime can always stop the world, at little cost to calls that finish in
// time.
//
// wazero's own mechanism (RuntimeConfig.WithCloseOnContextDone) leaves the
// compiled code for Go at every loop header and starts a watcher goroutine
// per call; measured here it made a small policy call 35 times slower
// (0.2 µs to 7 µs). Simply checking a flag in the guest is not enough
// either: compiled wasm is not preemptible, so a guest that loops without
// ever entering Go also blocks every stop-the-world pause of the garbage
// collector, freezing the whole process (the watchdog that would set the
// flag included).
//
// Instead, Instrument gives the module two mutable i32 globals, a budget and
// the stack left, and an import, wasmsched.yield (why i32) -> i32. At the
// header of every loop it inserts
//
//	budget -= 1
//	if budget == 0 {
//	    budget = Budget
//	    if wasmsched.yield(YieldBudget) != 0 { unreachable }
//	}
//
// and the same check at the entry of every function, after the function
// charges an estimate of its frame to the stack left (given back on every
// way out), calling wasmsched.yield(YieldStackOverflow) and trapping when
// that would go below zero. Instructions whose work grows with an operand
// (memory.copy, memory.fill, memory.init, table.copy, table.fill,
// table.init) first charge the budget by that operand; memory.grow and
// table.grow first yield. The hot path is a decrement and a branch. Every
// Budget units of work the guest enters the host: a Go function, so a point
// where the runtime can preempt the goroutine, and where the host decides
// whether the call has overrun its deadline.
//
// The rewrite preserves validity both ways: a module is valid after it if
// and only if it was before. The added type, function and globals get
// indices the original module could not name, and every type, function,
// global and local index the module uses is checked against the original
// index spaces (a module naming the budget global by the index it would get
// is refused, where an earlier version let it reset its own budget and run
// forever). Tables get a maximum so that they fit Limits.TableEntries.
//
// Adding an import renumbers the module's own functions, so every function
// index (calls, exports, the start function, element segments, constant
// expressions) is rewritten, and the "name" section, whose indices would be
// stale, is dropped.
//
// The package parses as much of the binary format as the rewrite and these
// checks need and leaves the rest of validation to wazero, which compiles
// the result. It checks every vector length, the number of locals and the
// structural limits that bound compile cost (see limits.go), because wazero
// trusts them.
package interrupt

import (
	"errors"
	"fmt"
)

// The import the instrumented module calls. It takes why it is called and
// returns non-zero when the call must stop.
const (
	ImportModule = "wasmsched"
	ImportName   = "yield"
)

// StackPointerExport is the name under which the rewrite exports a module's
// first global when it looks like the stack pointer of a stack in linear
// memory (a mutable i32 set to a constant, as LLVM-built guests such as
// TinyGo's keep it), so that the host can tell a trap caused by that stack
// running out (the pointer near 0, or wrapped below it) from other traps.
const StackPointerExport = "wasmsched$stack_pointer"

// Why the instrumented code calls the yield import.
const (
	// YieldBudget: the budget ran out; a non-zero answer stops the call.
	YieldBudget = 0
	// YieldStackOverflow: the call stack would exceed Limits.StackBytes;
	// the call traps right after, whatever the answer.
	YieldStackOverflow = 1
)

// Budget is how many units of work (loop iterations, function entries, or
// bulk work, see BulkMemoryUnit) run between two calls of the yield import.
const Budget = 10000

// Bulk instructions charge the budget one unit for every BulkMemoryUnit
// bytes (memory.copy, memory.fill, memory.init) or BulkTableUnit entries
// (table.copy, table.fill, table.init) they move. A unit is about what a
// loop iteration costs (a few ns): memory.copy moves 64 bytes in about as
// long here.
const (
	BulkMemoryUnit = 1 << bulkMemoryShift
	BulkTableUnit  = 1 << bulkTableShift

	bulkMemoryShift = 6
	bulkTableShift  = 3

	// bulkFree is the size, in units, under which a bulk instruction is
	// not charged beyond its loop's step (4 KiB, or 512 table entries):
	// a loop of such operations reaches the host within Budget × bulkFree
	// units, about 3 ms of copying here.
	bulkFree = 64
)

// Limits are the per-instance resources the rewritten module may use
// besides its linear memory. The zero value of a field takes its default.
type Limits struct {
	// StackBytes bounds the call stack: every function entry charges
	// FrameBytes for its parameters and locals. Default 1 MiB.
	StackBytes uint32
	// TableEntries bounds the entries of all the module's tables together
	// (wazero holds one 8-byte reference per entry) and of its element
	// segments. Default 1 Mi.
	TableEntries uint32
}

// Defaults of Limits.
const (
	DefaultStackBytes   = 1 << 20
	DefaultTableEntries = 1 << 20
)

func (l Limits) withDefaults() Limits {
	if l.StackBytes == 0 {
		l.StackBytes = DefaultStackBytes
	}
	if l.StackBytes > 1<<30 {
		l.StackBytes = 1 << 30
	}
	if l.TableEntries == 0 {
		l.TableEntries = DefaultTableEntries
	}
	return l
}

// FrameBytes is what a call of a function with the given numbers of
// parameters and locals charges to the stack: an estimate of its native
// frame in wazero's compiler (a fixed part and a slot per value).
func FrameBytes(params, locals uint32) uint32 {
	return frameFixed + frameSlot*(params+locals)
}

const (
	frameFixed = 64
	frameSlot  = 16
)

const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// order is the position a known section must take in a module.
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id   byte
	body []byte
}

// Instrument returns a copy of the module binary with the budget and stack
// globals, the yield import and the checks added, and its tables bounded by
// lim. It fails on malformed input, on indices the module cannot use, on
// modules over the structural limits, and on modules that already import
// wasmsched.yield.
func Instrument(bin []byte, lim Limits) ([]byte, error) {
	lim = lim.withDefaults()
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module (bad magic number)")
	}
	if bin[4] != 1 || bin[5] != 0 || bin[6] != 0 || bin[7] != 0 {
		return nil, fmt.Errorf("unsupported WebAssembly binary version %d", bin[4])
	}
	if len(bin) > MaxModuleBytes {
		return nil, fmt.Errorf("module of %d bytes is larger than %d", len(bin), MaxModuleBytes)
	}
	var (
		secs []section
		m    = &module{lim: lim}
	)
	r := &reader{b: bin, pos: 8}
	last := 0
	for r.pos < len(r.b) {
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		if id != secCustom {
			pos, ok := order[id]
			if !ok {
				return nil, fmt.Errorf("unknown section id %d", id)
			}
			if pos <= last {
				return nil, fmt.Errorf("section %d is out of order or repeated", id)
			}
			last = pos
		}
		// Sections are checked in order, before the next is read, as
		// wazero decodes them.
		if err := m.checkCounts(id, body); err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		if err := m.parse(id, body); err != nil {
			return nil, fmt.Errorf("%s section: %w", sectionName(id), err)
		}
		if id == secCustom && (&reader{b: body}).name() == "name" {
			continue // function indices change: its names would be wrong
		}
		secs = append(secs, section{id: id, body: body})
	}
	if m.importsYield {
		return nil, fmt.Errorf("module already imports %s.%s, a name reserved for the host", ImportModule, ImportName)
	}

	rw := newRewriter(m)
	var err error
	for i := range secs {
		var body []byte
		switch secs[i].id {
		case secTable:
			body, err = m.tables(secs[i].body)
		case secGlobal:
			body, err = rw.globals(secs[i].body)
		case secExport:
			body, err = rw.exports(secs[i].body)
		case secStart:
			body, err = rw.start(secs[i].body)
		case secElement:
			body, err = rw.elements(secs[i].body)
		case secCode:
			body, err = rw.code(secs[i].body)
		case secData:
			body, err = rw.data(secs[i].body)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s section: %w", sectionName(secs[i].id), err)
		}
		secs[i].body = body
	}
	// The additions, in their sections: types after the module's own, the
	// import after the module's imports, the globals after its globals.
	steps := []struct {
		id   byte
		name string
		fn   func(body []byte) ([]byte, error)
	}{
		{secType, "type", func(body []byte) ([]byte, error) {
			return appendToVector(body, rw.addedTypes()...)
		}},
		{secImport, "import", func(body []byte) ([]byte, error) {
			entry := appendName(appendName(nil, ImportModule), ImportName)
			entry = appendU32(append(entry, 0x00), rw.yieldType) // func of the added type
			return appendToVector(body, entry)
		}},
		{secGlobal, "global", func(body []byte) ([]byte, error) {
			budget := append(appendS32([]byte{0x7f, 0x01, 0x41}, Budget), 0x0b)               // mut i32 = Budget
			stack := append(appendS32([]byte{0x7f, 0x01, 0x41}, int32(lim.StackBytes)), 0x0b) // mut i32 = StackBytes
			return appendToVector(body, budget, stack)
		}},
	}
	if m.stackPointer && !rw.spExported {
		steps = append(steps, struct {
			id   byte
			name string
			fn   func(body []byte) ([]byte, error)
		}{secExport, "export", func(body []byte) ([]byte, error) {
			return appendToVector(body, appendU32(append(appendName(nil, StackPointerExport), 0x03), m.importedGlobals))
		}})
	}
	for _, st := range steps {
		if secs, err = upsert(secs, st.id, st.fn); err != nil {
			return nil, fmt.Errorf("%s section: %w", st.name, err)
		}
	}

	out := make([]byte, 0, len(bin)+len(bin)/3+64)
	out = append(out, bin[:8]...)
	for _, s := range secs {
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	return out, nil
}

func sectionName(id byte) string {
	if n, ok := sectionNames[id]; ok {
		return n
	}
	return fmt.Sprintf("id %d", id)
}

var sectionNames = map[byte]string{
	secCustom: "custom", secType: "type", secImport: "import", secFunction: "function",
	secTable: "table", secMemory: "memory", secGlobal: "global", secExport: "export",
	secStart: "start", secElement: "element", secCode: "code", secData: "data",
	secDataCount: "data count", secTag: "tag",
}

// upsert rewrites the section with the given id, creating it (with a nil
// body passed to fn) in its proper place when the module has none.
func upsert(secs []section, id byte, fn func(body []byte) ([]byte, error)) ([]section, error) {
	for i := range secs {
		if secs[i].id == id {
			b, err := fn(secs[i].body)
			if err != nil {
				return nil, err
			}
			secs[i].body = b
			return secs, nil
		}
	}
	b, err := fn(nil)
	if err != nil {
		return nil, err
	}
	at := len(secs)
	for i, s := range secs {
		if s.id != secCustom && order[s.id] > order[id] {
			at = i
			break
		}
	}
	secs = append(secs, section{})
	copy(secs[at+1:], secs[at:])
	secs[at] = section{id: id, body: b}
	return secs, nil
}

// appendToVector adds encoded entries to a vector-shaped section body.
func appendToVector(body []byte, entries ...[]byte) ([]byte, error) {
	n := uint32(0)
	rest := []byte(nil)
	if body != nil {
		r := &reader{b: body}
		n = r.u32()
		if r.err != nil {
			return nil, r.err
		}
		rest = body[r.pos:]
	}
	out := appendU32(nil, n+uint32(len(entries)))
	out = append(out, rest...)
	for _, e := range entries {
		out = append(out, e...)
	}
	return out, nil
}
