package interrupt

import (
	"errors"
	"fmt"
)

const (
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opEnd          = 0x0b
	opBrTable      = 0x0e
	opReturn       = 0x0f
	opCall         = 0x10
	opCallIndirect = 0x11
	opReturnCall   = 0x12
	opReturnCallIn = 0x13
	opLocalGet     = 0x20
	opLocalSet     = 0x21
	opLocalTee     = 0x22
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opMemoryGrow   = 0x40
	opRefFunc      = 0xd2
	opPrefixFC     = 0xfc

	fcMemoryInit = 8
	fcMemoryCopy = 10
	fcMemoryFill = 11
	fcTableInit  = 12
	fcTableCopy  = 14
	fcTableGrow  = 15
	fcTableFill  = 17
)

// rewriter renumbers function indices (the module's own functions move up
// by one to make room for the yield import), checks every index against the
// original index spaces, and inserts the checks.
type rewriter struct {
	m         *module
	yield     uint32 // function index of the yield import
	budget    uint32 // global index of the budget
	stack     uint32 // global index of the stack left
	yieldType uint32 // type index of the yield import
	// blockTypes are the types added for functions returning several
	// values (their bodies are wrapped in a block of type [] -> results),
	// by the encoding of their results.
	blockTypes map[string]uint32
	added      [][]byte // encoded types added after the yield type

	check []byte // the budget check

	spExported bool // the module exports StackPointerExport itself
}

func newRewriter(m *module) *rewriter {
	rw := &rewriter{
		m:          m,
		yield:      m.importedFuncs,
		budget:     m.globals(),
		stack:      m.globals() + 1,
		yieldType:  uint32(len(m.types)),
		blockTypes: map[string]uint32{},
	}
	// budget -= 1; if budget == 0 { budget = Budget; if yield(0) != 0 { unreachable } }
	c := rw.getGlobal(nil, rw.budget)
	c = append(c, 0x41, 0x01, 0x6b) // i32.const 1, i32.sub
	c = rw.setGlobal(c, rw.budget)
	c = rw.getGlobal(c, rw.budget)
	c = append(c, 0x45, opIf, 0x40) // i32.eqz, if
	c = rw.refill(c)
	rw.check = append(c, opEnd)
	return rw
}

func (rw *rewriter) getGlobal(b []byte, idx uint32) []byte {
	return appendU32(append(b, opGlobalGet), idx)
}

func (rw *rewriter) setGlobal(b []byte, idx uint32) []byte {
	return appendU32(append(b, opGlobalSet), idx)
}

// refill appends: budget = Budget; if yield(YieldBudget) != 0 { unreachable }
func (rw *rewriter) refill(b []byte) []byte {
	b = appendS32(append(b, 0x41), Budget)
	b = rw.setGlobal(b, rw.budget)
	b = append(b, 0x41, YieldBudget)
	b = appendU32(append(b, opCall), rw.yield)
	return append(b, opIf, 0x40, 0x00, opEnd) // if unreachable end
}

// addedTypes returns the encoded types the rewrite adds: the yield import's
// (i32) -> (i32), then the block types.
func (rw *rewriter) addedTypes() [][]byte {
	return append([][]byte{{0x60, 0x01, 0x7f, 0x01, 0x7f}}, rw.added...)
}

// blockType returns the encoding of a block type [] -> the results of ft.
func (rw *rewriter) blockType(ft funcType) []byte {
	switch ft.results {
	case 0:
		return []byte{0x40}
	case 1:
		return ft.resultsEnc
	}
	idx, ok := rw.blockTypes[string(ft.resultsEnc)]
	if !ok {
		idx = rw.yieldType + 1 + uint32(len(rw.added))
		rw.blockTypes[string(ft.resultsEnc)] = idx
		t := appendU32([]byte{0x60, 0x00}, ft.results)
		rw.added = append(rw.added, append(t, ft.resultsEnc...))
	}
	return appendS32(nil, int32(idx))
}

// fn checks a function index and returns its new number.
func (rw *rewriter) fn(idx uint32) (uint32, error) {
	if idx >= rw.m.funcs() {
		return 0, fmt.Errorf("function index %d out of range (%d functions)", idx, rw.m.funcs())
	}
	if idx >= rw.m.importedFuncs {
		return idx + 1, nil
	}
	return idx, nil
}

func (rw *rewriter) global(idx uint32) error {
	if idx >= rw.m.globals() {
		return fmt.Errorf("global index %d out of range (%d globals)", idx, rw.m.globals())
	}
	return nil
}

func (rw *rewriter) typeIndex(idx int64) error {
	if idx >= int64(len(rw.m.types)) {
		return fmt.Errorf("type index %d out of range (%d types)", idx, len(rw.m.types))
	}
	return nil
}

func (rw *rewriter) code(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+len(body)/3), n)
	var fn, scratch []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		code := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, r.err)
		}
		if i >= rw.m.definedFuncs {
			return nil, fmt.Errorf("%d function bodies for %d functions", n, rw.m.definedFuncs)
		}
		ft := rw.m.types[rw.m.funcTypes[rw.m.importedFuncs+i]]
		var err error
		fn, scratch, err = rw.function(fn[:0], scratch[:0], code, ft)
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

// function rewrites one body into out, using buf as scratch space:
//
//	locals (and an i32 scratch local, when a bulk instruction needs it)
//	stack -= frame; if stack < 0 { yield(YieldStackOverflow); unreachable }
//	budget check
//	block [] -> results
//	    body, its own final end closing this block
//	stack += frame
//	end
//
// Branches to the function's label now end the block, so every way out but
// return (and the tail calls) passes the line that gives the frame back;
// return and the tail calls give it back first.
func (rw *rewriter) function(out, buf, code []byte, ft funcType) ([]byte, []byte, error) {
	r := &reader{b: code}
	groups := r.u32()
	var locals uint32
	for i := uint32(0); i < groups && r.err == nil; i++ {
		locals += r.u32() // bounded by checkCounts
		r.valType()
	}
	if r.err != nil {
		return nil, nil, fmt.Errorf("locals: %w", r.err)
	}
	declared := code[:r.pos]
	f := &funcRewrite{rw: rw, r: r, locals: ft.params + locals, frame: FrameBytes(ft.params, locals)}
	f.out = buf
	if err := f.instructions(); err != nil {
		return nil, nil, err
	}
	body := f.out

	if f.scratchUsed {
		// One more group: a single i32.
		gr := &reader{b: declared}
		gr.u32()
		out = appendU32(out, groups+1)
		out = append(out, declared[gr.pos:]...)
		out = append(out, 0x01, 0x7f)
	} else {
		out = append(out, declared...)
	}
	out = rw.getGlobal(out, rw.stack)
	out = appendS32(append(out, 0x41), int32(f.frame))
	out = append(out, 0x6b) // i32.sub
	out = rw.setGlobal(out, rw.stack)
	out = rw.getGlobal(out, rw.stack)
	out = append(out, 0x41, 0x00, 0x48, opIf, 0x40, 0x41, YieldStackOverflow) // i32.const 0, i32.lt_s, if, i32.const 1
	out = appendU32(append(out, opCall), rw.yield)
	out = append(out, 0x1a, 0x00, opEnd) // drop, unreachable, end
	out = append(out, rw.check...)
	out = append(append(out, opBlock), rw.blockType(ft)...)
	out = append(out, body...)
	out = f.giveBack(out)
	return append(out, opEnd), body, nil
}

// funcRewrite is the state of one function's rewrite.
type funcRewrite struct {
	rw          *rewriter
	r           *reader
	out         []byte
	locals      uint32 // parameters and declared locals
	frame       uint32
	scratchUsed bool
}

// giveBack appends: stack += frame.
func (f *funcRewrite) giveBack(b []byte) []byte {
	b = f.rw.getGlobal(b, f.rw.stack)
	b = appendS32(append(b, 0x41), int32(f.frame))
	b = append(b, 0x6a) // i32.add
	return f.rw.setGlobal(b, f.rw.stack)
}

// charge appends, for a bulk instruction whose count is on top of the
// stack: if count >> shift >= bulkFree { budget -= count >> shift, yielding
// when the budget runs out }. The count stays on the stack (through the
// scratch local). Small operations (Go's memmove uses memory.copy for
// every copy) cost a compare and a branch; each is charged as one step of
// its loop, at most bulkFree times less than its work.
func (f *funcRewrite) charge(shift byte) {
	rw, s := f.rw, f.locals
	f.scratchUsed = true
	b := appendU32(append(f.out, opLocalTee), s)
	b = appendU32(append(b, opLocalGet), s)
	b = appendS32(append(b, 0x41), bulkFree<<shift)
	b = append(b, 0x4f, opIf, 0x40) // i32.ge_u, if
	b = rw.getGlobal(b, rw.budget)
	b = appendU32(append(b, opLocalGet), s)
	b = append(b, 0x41, shift, 0x76, 0x6b) // i32.const shift, i32.shr_u, i32.sub
	b = rw.setGlobal(b, rw.budget)
	b = rw.getGlobal(b, rw.budget)
	b = append(b, 0x41, 0x00, 0x4c, opIf, 0x40) // i32.const 0, i32.le_s, if
	b = rw.refill(b)
	f.out = append(b, opEnd, opEnd)
}

// yieldNow appends an unconditional refill: the deadline is checked before
// an instruction whose cost the budget cannot see (memory.grow, table.grow).
func (f *funcRewrite) yieldNow() { f.out = f.rw.refill(f.out) }

// instructions copies the body's instructions, checking indices,
// renumbering functions and inserting checks, up to the function's final
// end, which must be its last byte.
func (f *funcRewrite) instructions() error {
	r, rw := f.r, f.rw
	depth := 0
	var brWork uint64
	for r.pos < len(r.b) {
		start := r.pos
		op := r.byte()
		fail := func(err error) error { return fmt.Errorf("opcode %#x at offset %d: %w", op, start, err) }
		switch op {
		case opBlock, opLoop, opIf:
			if idx := r.blockType(); r.err == nil && idx >= 0 {
				if err := rw.typeIndex(idx); err != nil {
					return fail(err)
				}
			}
			if depth++; depth > MaxNesting {
				return fail(fmt.Errorf("blocks nest deeper than %d", MaxNesting))
			}
		case opEnd:
			if depth == 0 {
				if r.pos != len(r.b) {
					return fail(errors.New("instructions after the function's end"))
				}
				f.out = append(f.out, op)
				return nil
			}
			depth--
		case opCall, opReturnCall, opRefFunc:
			idx := r.u32()
			if r.err != nil {
				return fail(r.err)
			}
			n, err := rw.fn(idx)
			if err != nil {
				return fail(err)
			}
			if op == opReturnCall {
				f.out = f.giveBack(f.out)
			}
			f.out = appendU32(append(f.out, op), n)
			continue
		case opCallIndirect, opReturnCallIn:
			t := r.u32()
			r.u32()
			if r.err == nil {
				if err := rw.typeIndex(int64(t)); err != nil {
					return fail(err)
				}
			}
			if op == opReturnCallIn {
				f.out = f.giveBack(f.out)
			}
		case opReturn:
			f.out = f.giveBack(f.out)
		case opBrTable:
			n := r.u32()
			if r.err == nil && n >= MaxBrTableTargets {
				return fail(fmt.Errorf("br_table of %d targets, more than %d", n+1, MaxBrTableTargets))
			}
			if brWork += uint64(n+1) * uint64(depth+1); brWork > MaxBrTableWork {
				return fail(fmt.Errorf("br_table targets times nesting exceed %d in this function", MaxBrTableWork))
			}
			for i := uint32(0); i <= n && r.err == nil; i++ {
				r.u32()
			}
		case opLocalGet, opLocalSet, opLocalTee:
			if idx := r.u32(); r.err == nil && idx >= f.locals {
				return fail(fmt.Errorf("local index %d out of range (%d locals)", idx, f.locals))
			}
		case opGlobalGet, opGlobalSet:
			if idx := r.u32(); r.err == nil {
				if err := rw.global(idx); err != nil {
					return fail(err)
				}
			}
		case opMemoryGrow:
			f.yieldNow()
			r.byte()
		case opPrefixFC:
			sub := r.u32()
			if r.err != nil {
				return fail(r.err)
			}
			switch sub {
			case fcMemoryInit, fcMemoryCopy, fcMemoryFill:
				f.charge(bulkMemoryShift)
			case fcTableInit, fcTableCopy, fcTableFill:
				f.charge(bulkTableShift)
			case fcTableGrow:
				f.yieldNow()
			}
			if err := skipFC(r, sub); err != nil {
				return fail(err)
			}
		default:
			if err := skipImmediates(r, op); err != nil {
				return fail(err)
			}
		}
		if r.err != nil {
			return fail(r.err)
		}
		f.out = append(f.out, r.b[start:r.pos]...)
		if op == opLoop {
			f.out = append(f.out, rw.check...)
		}
	}
	return errEOF
}

// constExpr copies a constant expression, up to and including its end,
// checking and renumbering its indices.
func (rw *rewriter) constExpr(out []byte, r *reader) ([]byte, error) {
	for r.pos < len(r.b) {
		start := r.pos
		op := r.byte()
		switch op {
		case opRefFunc:
			idx := r.u32()
			if r.err != nil {
				return nil, r.err
			}
			n, err := rw.fn(idx)
			if err != nil {
				return nil, err
			}
			out = appendU32(append(out, op), n)
			continue
		case opGlobalGet:
			if idx := r.u32(); r.err == nil {
				if err := rw.global(idx); err != nil {
					return nil, err
				}
			}
		default:
			if err := skipImmediates(r, op); err != nil {
				return nil, fmt.Errorf("opcode %#x in a constant expression: %w", op, err)
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, r.b[start:r.pos]...)
		if op == opEnd {
			return out, nil
		}
	}
	return nil, errEOF
}

// exports renumbers exported functions and checks exported globals.
func (rw *rewriter) exports(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+8), n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		name := r.name()
		if name == StackPointerExport {
			rw.spExported = true
		}
		out = appendName(out, name)
		kind := r.byte()
		idx := r.u32()
		if r.err != nil {
			break
		}
		switch kind {
		case 0x00:
			var err error
			if idx, err = rw.fn(idx); err != nil {
				return nil, fmt.Errorf("export %d: %w", i, err)
			}
		case 0x03:
			if err := rw.global(idx); err != nil {
				return nil, fmt.Errorf("export %d: %w", i, err)
			}
		}
		out = appendU32(append(out, kind), idx)
	}
	return out, trailing(r)
}

// trailing reports a read error, or bytes left in a section after its last
// entry (wazero refuses those; a rewrite that dropped them would not).
func trailing(r *reader) error {
	if r.err != nil {
		return r.err
	}
	if r.pos != len(r.b) {
		return fmt.Errorf("%d trailing bytes after the last entry", len(r.b)-r.pos)
	}
	return nil
}

func (rw *rewriter) start(body []byte) ([]byte, error) {
	r := &reader{b: body}
	idx := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	n, err := rw.fn(idx)
	if err != nil {
		return nil, err
	}
	return appendU32(nil, n), trailing(r)
}

// globals checks and renumbers the global initialisers.
func (rw *rewriter) globals(body []byte) ([]byte, error) {
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
	return out, trailing(r)
}

// data checks the offsets of data segments.
func (rw *rewriter) data(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	var err error
	for i := uint32(0); i < n && r.err == nil; i++ {
		switch kind := r.u32(); kind {
		case 0:
			_, err = rw.constExpr(nil, r)
		case 2:
			r.u32()
			_, err = rw.constExpr(nil, r)
		}
		if err != nil {
			return nil, fmt.Errorf("data segment %d: %w", i, err)
		}
		r.bytes(int(r.u32()))
	}
	return body, trailing(r)
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
		for j := uint32(0); j < k && r.err == nil && err == nil; j++ {
			var idx uint32
			if idx, err = rw.fn(r.u32()); err == nil {
				out = appendU32(out, idx)
			}
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
		if err != nil {
			return nil, fmt.Errorf("element segment %d: %w", i, err)
		}
	}
	return out, trailing(r)
}
