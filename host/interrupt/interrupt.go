// Package interrupt rewrites a WebAssembly module so that the host can stop a
// running call, and the Go runtime can always stop the world, at almost no
// cost to calls that finish in time.
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
// Instead, Instrument gives the module a mutable i32 budget global and an
// import, wasmsched.yield () -> i32, and at the entry of every function and
// the header of every loop inserts
//
//	budget -= 1
//	if budget == 0 {
//	    budget = Budget
//	    if wasmsched.yield() != 0 { unreachable }
//	}
//
// The hot path is a decrement and a branch. Every Budget checks the guest
// enters the host: a Go function, so a point where the runtime can preempt
// the goroutine, and where the host decides whether the call has overrun
// its deadline. A guest cannot run unboundedly without looping or calling,
// so every runaway is caught within Budget iterations of its deadline.
//
// Adding an import renumbers the module's own functions, so every function
// index (calls, exports, the start function, element segments, constant
// expressions) is rewritten, and the "name" section, whose indices would be
// stale, is dropped.
//
// The package only parses as much of the binary format as the rewrite needs
// and leaves full validation to wazero, which compiles the result. It does
// check every vector length and the number of locals, because wazero trusts
// them (see checkCounts).
package interrupt

import (
	"errors"
	"fmt"
)

// The import the instrumented module calls every Budget checks. It takes
// nothing and returns non-zero when the call must stop.
const (
	ImportModule = "wasmsched"
	ImportName   = "yield"
)

// Budget is how many checks (loop iterations and function entries) run
// between two calls of the yield import.
const Budget = 10000

const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secTable    = 4
	secMemory   = 5
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElement  = 9
	secCode     = 10
	secData     = 11
	secTag      = 13

	opLoop       = 0x03
	opCall       = 0x10
	opReturnCall = 0x12
	opGlobalGet  = 0x23
	opGlobalSet  = 0x24
	opRefFunc    = 0xd2
)

// order is the position a known section must take in a module.
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id   byte
	body []byte
}

// Instrument returns a copy of the module binary with the budget global,
// the yield import and the checks added. It fails on malformed input and on
// modules that already import wasmsched.yield.
func Instrument(bin []byte) ([]byte, error) {
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module (bad magic number)")
	}
	if bin[4] != 1 || bin[5] != 0 || bin[6] != 0 || bin[7] != 0 {
		return nil, fmt.Errorf("unsupported WebAssembly binary version %d", bin[4])
	}
	var (
		secs   []section
		m      moduleCounts
		locals uint64
	)
	r := &reader{b: bin, pos: 8}
	for r.pos < len(r.b) {
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		if id != secCustom {
			if _, ok := order[id]; !ok {
				return nil, fmt.Errorf("unknown section id %d", id)
			}
		}
		// Sections are checked in order, before the next is read, as
		// wazero decodes them.
		if err := checkCounts(id, body, &locals); err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		switch id {
		case secType:
			r := &reader{b: body}
			m.types = r.count()
		case secImport:
			if err := m.countImports(body); err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
		case secGlobal:
			r := &reader{b: body}
			m.definedGlobals = r.count()
			if r.err != nil {
				return nil, fmt.Errorf("global section: %w", r.err)
			}
		case secCustom:
			if (&reader{b: body}).name() == "name" {
				continue // function indices change: its names would be wrong
			}
		}
		secs = append(secs, section{id: id, body: body})
	}

	rw := rewriter{firstDefined: m.importedFuncs}
	yield := m.importedFuncs
	global := m.importedGlobals + m.definedGlobals
	rw.check = appendU32([]byte{opGlobalGet}, global)
	rw.check = append(rw.check, 0x41, 0x01, 0x6b) // i32.const 1, i32.sub
	rw.check = appendU32(append(rw.check, opGlobalSet), global)
	rw.check = appendU32(append(rw.check, opGlobalGet), global)
	rw.check = append(rw.check, 0x45, 0x04, 0x40) // i32.eqz, if
	rw.check = appendS32(append(rw.check, 0x41), Budget)
	rw.check = appendU32(append(rw.check, opGlobalSet), global)
	rw.check = appendU32(append(rw.check, opCall), yield)
	rw.check = append(rw.check, 0x04, 0x40, 0x00, 0x0b, 0x0b) // if unreachable end, end

	var err error
	steps := []struct {
		id   byte
		name string
		fn   func(body []byte) ([]byte, error)
	}{
		{secType, "type", func(body []byte) ([]byte, error) {
			return appendToVector(body, []byte{0x60, 0x00, 0x01, 0x7f}) // () -> i32
		}},
		{secImport, "import", func(body []byte) ([]byte, error) {
			entry := appendName(appendName(nil, ImportModule), ImportName)
			entry = appendU32(append(entry, 0x00), m.types) // func of the new type
			return appendToVector(body, entry)
		}},
		{secGlobal, "global", func(body []byte) ([]byte, error) {
			if body, err = rw.globals(body); err != nil {
				return nil, err
			}
			entry := appendS32([]byte{0x7f, 0x01, 0x41}, Budget) // mut i32 = Budget
			return appendToVector(body, append(entry, 0x0b))
		}},
	}
	for _, st := range steps {
		if secs, err = upsert(secs, st.id, st.fn); err != nil {
			return nil, fmt.Errorf("%s section: %w", st.name, err)
		}
	}
	if m.importsYield {
		return nil, fmt.Errorf("module already imports %s.%s, a name reserved for the host", ImportModule, ImportName)
	}
	for i := range secs {
		var body []byte
		switch secs[i].id {
		case secExport:
			body, err = rw.exports(secs[i].body)
		case secStart:
			body, err = rw.start(secs[i].body)
		case secElement:
			body, err = rw.elements(secs[i].body)
		case secCode:
			body, err = rw.code(secs[i].body)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s section: %w", sectionName(secs[i].id), err)
		}
		secs[i].body = body
	}

	out := make([]byte, 0, len(bin)+len(bin)/4+64)
	out = append(out, bin[:8]...)
	for _, s := range secs {
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	return out, nil
}

func sectionName(id byte) string {
	switch id {
	case secExport:
		return "export"
	case secStart:
		return "start"
	case secElement:
		return "element"
	case secCode:
		return "code"
	}
	return fmt.Sprintf("id %d", id)
}

// moduleCounts are the index spaces the rewrite needs.
type moduleCounts struct {
	types           uint32
	importedFuncs   uint32
	importedGlobals uint32
	definedGlobals  uint32
	importsYield    bool
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

// appendToVector adds one encoded entry to a vector-shaped section body.
func appendToVector(body, entry []byte) ([]byte, error) {
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
	out := appendU32(nil, n+1)
	out = append(out, rest...)
	return append(out, entry...), nil
}

func (m *moduleCounts) countImports(body []byte) error {
	r := &reader{b: body}
	n := r.count()
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod, name := r.name(), r.name()
		switch kind := r.byte(); kind {
		case 0x00: // func
			r.u32()
			m.importedFuncs++
			if mod == ImportModule && name == ImportName {
				m.importsYield = true
			}
		case 0x01: // table
			r.valType()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.valType()
			r.byte()
			m.importedGlobals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			if r.err == nil {
				return fmt.Errorf("import %d: unknown kind %#x", i, kind)
			}
		}
	}
	return r.err
}

// Limits on locals, which the binary format run-length encodes: a function
// of six bytes can declare 2^32-1 of them. Web engines allow 50000 locals a
// function; a standard Go guest declares a few dozen.
const (
	maxFunctionLocals = 50000
	maxModuleLocals   = 1 << 22
)

// checkCounts refuses a section that declares a vector longer than the rest
// of the section could hold, or functions with more locals than
// maxFunctionLocals (maxModuleLocals in all); locals accumulates the count
// across code sections.
//
// wazero's decoder (v1.12) allocates the declared length of a vector before
// it reads the entries, and reads past the end of a section (it compares
// lengths afterwards). A 14-byte module declaring 2^28 exports made it
// allocate 16 GB, and a Go program whose allocation fails aborts with
// "fatal error: out of memory", which no recover catches: one bad module
// took the whole scheduler down. Checked here, every vector wazero
// allocates is bounded by the size of the module.
func checkCounts(id byte, body []byte, locals *uint64) error {
	r := &reader{b: body}
	switch id {
	case secCustom:
		if r.name() == "name" {
			r.nameSection()
		}
	case secType:
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			if r.pos < len(r.b) && r.b[r.pos] == 0x4e { // recursive type group
				r.pos++
				for m, j := r.count(), uint32(0); j < m && r.err == nil; j++ {
					r.funcType()
				}
				continue
			}
			r.funcType()
		}
	case secFunction, secTable, secMemory, secTag:
		r.count()
	case secExport:
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			r.name()
			r.byte()
			r.u32()
		}
	case secElement:
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			r.elementSegment()
		}
	case secCode:
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			fn := &reader{b: r.bytes(int(r.u32()))}
			if r.err != nil {
				return nil // reported by instrumentCode
			}
			var sum uint64
			for g, j := fn.count(), uint32(0); j < g && fn.err == nil; j++ {
				sum += uint64(fn.u32())
				fn.valType()
			}
			// A malformed body is reported by instrumentFunction.
			*locals += sum
			if sum > maxFunctionLocals {
				return fmt.Errorf("function %d declares %d locals, more than %d", i, sum, maxFunctionLocals)
			}
			if *locals > maxModuleLocals {
				return fmt.Errorf("the functions declare more than %d locals in all", maxModuleLocals)
			}
		}
	case secData:
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			switch kind := r.u32(); kind {
			case 0: // active
				r.constExpr()
			case 1: // passive
			case 2: // active, with a memory index
				r.u32()
				r.constExpr()
			default:
				return fmt.Errorf("data segment %d: unknown kind %d", i, kind)
			}
			r.bytes(int(r.u32()))
		}
	}
	return r.err
}

// funcType skips a function type, 0x60 and its parameter and result types.
func (r *reader) funcType() {
	if form := r.byte(); r.err == nil && form != 0x60 {
		r.err = fmt.Errorf("unknown type form %#x", form)
	}
	for range 2 {
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			r.valType()
		}
	}
}

// elementSegment skips one element segment, in any of its eight encodings.
func (r *reader) elementSegment() {
	funcIndices := func() {
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			r.u32()
		}
	}
	exprs := func() {
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			r.constExpr()
		}
	}
	switch kind := r.u32(); kind {
	case 0: // active, table 0, function indices
		r.constExpr()
		funcIndices()
	case 1, 3: // passive or declarative, function indices
		r.byte()
		funcIndices()
	case 2: // active, function indices
		r.u32()
		r.constExpr()
		r.byte()
		funcIndices()
	case 4: // active, table 0, expressions
		r.constExpr()
		exprs()
	case 5, 7: // passive or declarative, expressions
		r.valType()
		exprs()
	case 6: // active, expressions
		r.u32()
		r.constExpr()
		r.valType()
		exprs()
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unknown element segment kind %d", kind)
		}
	}
}

// nameSection skips the subsections of the "name" custom section that
// wazero decodes (module, function and local names) as wazero reads them:
// from where the previous one ended, whatever their declared size.
func (r *reader) nameSection() {
	nameMap := func() {
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			r.u32()
			r.name()
		}
	}
	for r.pos < len(r.b) && r.err == nil {
		id := r.byte()
		size := r.u32()
		switch id {
		case 0:
			r.name()
		case 1:
			nameMap()
		case 2:
			for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
				r.u32()
				nameMap()
			}
		default:
			r.bytes(int(size))
		}
	}
}

// rewriter renumbers function indices (the module's own functions move up
// by one to make room for the yield import) and inserts the checks.
type rewriter struct {
	firstDefined uint32 // index of the first function defined in the module
	check        []byte
}

func (rw *rewriter) fn(idx uint32) uint32 {
	if idx >= rw.firstDefined {
		return idx + 1
	}
	return idx
}

func (rw *rewriter) code(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+len(body)/4), n)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		code := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, r.err)
		}
		var err error
		fn, err = rw.function(fn[:0], code)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if r.pos != len(body) {
		return nil, errors.New("trailing bytes after the last function")
	}
	return out, nil
}

func (rw *rewriter) function(out, code []byte) ([]byte, error) {
	r := &reader{b: code}
	groups := r.u32()
	for i := uint32(0); i < groups && r.err == nil; i++ {
		r.u32()
		r.valType()
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %w", r.err)
	}
	out = append(out, code[:r.pos]...)
	out = append(out, rw.check...)
	return rw.instructions(out, r, false)
}

// instructions copies instructions from r to out, renumbering function
// indices and adding checks after loop headers; in a constant expression
// (constExpr) it stops after the closing end.
func (rw *rewriter) instructions(out []byte, r *reader, constExpr bool) ([]byte, error) {
	for r.pos < len(r.b) {
		start := r.pos
		op := r.byte()
		switch op {
		case opCall, opReturnCall, opRefFunc:
			idx := r.u32()
			if r.err != nil {
				return nil, fmt.Errorf("opcode %#x at offset %d: %w", op, start, r.err)
			}
			out = appendU32(append(out, op), rw.fn(idx))
			continue
		}
		if err := skipImmediates(r, op); err != nil {
			return nil, fmt.Errorf("opcode %#x at offset %d: %w", op, start, err)
		}
		if r.err != nil {
			return nil, fmt.Errorf("opcode %#x at offset %d: %w", op, start, r.err)
		}
		out = append(out, r.b[start:r.pos]...)
		if op == opLoop && !constExpr {
			out = append(out, rw.check...)
		}
		if op == 0x0b && constExpr {
			return out, nil
		}
	}
	if constExpr {
		return nil, errEOF
	}
	return out, nil
}

func (rw *rewriter) constExpr(out []byte, r *reader) ([]byte, error) {
	return rw.instructions(out, r, true)
}

// exports renumbers exported functions.
func (rw *rewriter) exports(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+8), n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		out = appendName(out, r.name())
		kind := r.byte()
		idx := r.u32()
		if kind == 0x00 {
			idx = rw.fn(idx)
		}
		out = appendU32(append(out, kind), idx)
	}
	return out, r.err
}

func (rw *rewriter) start(body []byte) ([]byte, error) {
	r := &reader{b: body}
	idx := r.u32()
	return appendU32(nil, rw.fn(idx)), r.err
}

// globals renumbers ref.func in global initialisers.
func (rw *rewriter) globals(body []byte) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+8), n)
	var err error
	for i := uint32(0); i < n && r.err == nil; i++ {
		t := r.pos
		r.valType()
		r.byte() // mutability
		if r.err != nil {
			break
		}
		out = append(out, r.b[t:r.pos]...)
		if out, err = rw.constExpr(out, r); err != nil {
			return nil, fmt.Errorf("global %d: %w", i, err)
		}
	}
	return out, r.err
}

// elements renumbers the functions in element segments, in any of their
// eight encodings.
func (rw *rewriter) elements(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+16), n)
	var err error
	funcIndices := func() {
		k := r.u32()
		out = appendU32(out, k)
		for j := uint32(0); j < k && r.err == nil; j++ {
			out = appendU32(out, rw.fn(r.u32()))
		}
	}
	exprs := func() {
		k := r.u32()
		out = appendU32(out, k)
		for j := uint32(0); j < k && r.err == nil && err == nil; j++ {
			out, err = rw.constExpr(out, r)
		}
	}
	copyFrom := func(from int) { out = append(out, r.b[from:r.pos]...) }
	for i := uint32(0); i < n && r.err == nil && err == nil; i++ {
		kind := r.u32()
		out = appendU32(out, kind)
		switch kind {
		case 0:
			if out, err = rw.constExpr(out, r); err == nil {
				funcIndices()
			}
		case 1, 3:
			from := r.pos
			r.byte()
			copyFrom(from)
			funcIndices()
		case 2:
			from := r.pos
			r.u32()
			copyFrom(from)
			if out, err = rw.constExpr(out, r); err == nil {
				from = r.pos
				r.byte()
				copyFrom(from)
				funcIndices()
			}
		case 4:
			if out, err = rw.constExpr(out, r); err == nil {
				exprs()
			}
		case 5, 7:
			from := r.pos
			r.valType()
			copyFrom(from)
			exprs()
		case 6:
			from := r.pos
			r.u32()
			copyFrom(from)
			if out, err = rw.constExpr(out, r); err == nil {
				from = r.pos
				r.valType()
				copyFrom(from)
				exprs()
			}
		default:
			return nil, fmt.Errorf("element segment %d: unknown kind %d", i, kind)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, r.err
}

// skipImmediates advances r past the immediates of op.
func skipImmediates(r *reader, op byte) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		r.blockType()
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x10 || op == 0x12: // call, return_call
		r.u32()
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.valType()
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.u32()
		r.u32()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		r.byte()
	case op == 0x41:
		r.s64()
	case op == 0x42:
		r.s64()
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null
		r.s64() // heap type
	case op == 0xd2: // ref.func
		r.u32()
	case op == 0xfc:
		return skipFC(r, r.u32())
	case op == 0xfd:
		return skipSIMD(r, r.u32())
	case op == 0xfe:
		if sub := r.u32(); sub == 0x03 { // atomic.fence
			r.byte()
		} else {
			r.u32()
			r.u32()
		}
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		(op >= 0x45 && op <= 0xc4) || op == 0xd1:
		// no immediates
	default:
		return errors.New("unknown opcode")
	}
	return nil
}

func skipFC(r *reader, sub uint32) error {
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init
		r.u32()
		r.byte()
	case sub == 9 || sub == 13 || (sub >= 15 && sub <= 17): // data.drop, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10: // memory.copy
		r.byte()
		r.byte()
	case sub == 11: // memory.fill
		r.byte()
	case sub == 12 || sub == 14: // table.init, table.copy
		r.u32()
		r.u32()
	default:
		return fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
	}
	return nil
}

func skipSIMD(r *reader, sub uint32) error {
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads and stores
		r.u32()
		r.u32()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.u32()
		r.u32()
		r.byte()
	case sub <= 275:
		// no immediates
	default:
		return fmt.Errorf("unknown 0xfd sub-opcode %d", sub)
	}
	return nil
}

// reader decodes the binary format; the first error sticks and later reads
// return zero values.
type reader struct {
	b   []byte
	pos int
	err error
}

var errEOF = errors.New("unexpected end of data")

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.err = errEOF
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.err = errEOF
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("LEB128 value too long")
	return 0
}

func (r *reader) s64() {
	for i := 0; i < 10; i++ {
		if c := r.byte(); r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.err = errors.New("LEB128 value too long")
}

func (r *reader) name() string {
	return string(r.bytes(int(r.u32())))
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&0x01 != 0 {
		r.u32()
	}
}

// blockType skips a block type: 0x40, a value type, or an s33 type index.
func (r *reader) blockType() {
	if r.pos < len(r.b) {
		if c := r.b[r.pos]; c == 0x40 || (c >= 0x6f && c <= 0x7f) || c == refNull || c == ref {
			r.valType()
			return
		}
	}
	r.s64()
}

// Prefixes of the reference types that name a heap type: (ref null ht) and
// (ref ht). wazero decodes (ref null func) and (ref null extern) as funcref
// and externref wherever a value type may appear.
const (
	refNull = 0x63
	ref     = 0x64
)

// valType skips a value type: one byte, or a reference prefix and its s33
// heap type.
func (r *reader) valType() {
	if c := r.byte(); c == refNull || c == ref {
		r.s64()
	}
}

// count reads the length of a vector and fails if the rest of the data
// cannot hold that many entries of at least one byte each.
func (r *reader) count() uint32 {
	n := r.u32()
	if left := len(r.b) - r.pos; r.err == nil && uint64(n) > uint64(left) {
		r.err = fmt.Errorf("vector of %d entries cannot fit in the %d bytes left", n, left)
	}
	return n
}

// constExpr skips a constant expression, up to and including its end.
func (r *reader) constExpr() {
	for r.err == nil {
		op := r.byte()
		if op == 0x0b {
			return
		}
		if err := skipImmediates(r, op); err != nil && r.err == nil {
			r.err = fmt.Errorf("opcode %#x in a constant expression: %w", op, err)
		}
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}
