package interrupt

import (
	"fmt"
)

// funcType is what the rewrite needs of a function type.
type funcType struct {
	params, results uint32
	// resultsEnc is the encoding of the result types, without the count.
	resultsEnc []byte
}

// module holds the original module's index spaces, as sections are parsed
// in order.
type module struct {
	lim Limits

	types           []funcType
	funcTypes       []uint32 // type index of every function, imported first
	importedFuncs   uint32
	definedFuncs    uint32
	importedGlobals uint32
	definedGlobals  uint32
	bodies          int
	locals          uint64 // in all functions
	elements        uint64 // element segment entries in all
	importsYield    bool
	// stackPointer: the module's first defined global looks like a stack
	// pointer in linear memory; the rewrite exports it (StackPointerExport).
	stackPointer bool
}

func (m *module) globals() uint32 { return m.importedGlobals + m.definedGlobals }
func (m *module) funcs() uint32   { return uint32(len(m.funcTypes)) }

// parse records what the rewrite needs of a section. checkCounts has
// already bounded its vectors.
func (m *module) parse(id byte, body []byte) error {
	r := &reader{b: body}
	switch id {
	case secType:
		n := r.count()
		if n > MaxTypes {
			return fmt.Errorf("%d types, more than %d", n, MaxTypes)
		}
		for i := uint32(0); i < n && r.err == nil; i++ {
			if r.pos < len(r.b) && r.b[r.pos] == 0x4e {
				return fmt.Errorf("type %d: recursive type groups are not supported", i)
			}
			var ft funcType
			r.byte() // 0x60, checked by checkCounts
			ft.params = r.count()
			for j := uint32(0); j < ft.params && r.err == nil; j++ {
				r.valType()
			}
			ft.results = r.count()
			from := r.pos
			for j := uint32(0); j < ft.results && r.err == nil; j++ {
				r.valType()
			}
			ft.resultsEnc = r.b[from:r.pos]
			m.types = append(m.types, ft)
		}
	case secImport:
		n := r.count()
		for i := uint32(0); i < n && r.err == nil; i++ {
			mod, name := r.name(), r.name()
			switch kind := r.byte(); kind {
			case 0x00: // func
				t := r.u32()
				if r.err == nil && int(t) >= len(m.types) {
					return fmt.Errorf("import %d: type index %d out of range (%d types)", i, t, len(m.types))
				}
				m.funcTypes = append(m.funcTypes, t)
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
	case secFunction:
		n := r.count()
		for i := uint32(0); i < n && r.err == nil; i++ {
			t := r.u32()
			if r.err == nil && int(t) >= len(m.types) {
				return fmt.Errorf("function %d: type index %d out of range (%d types)", i, t, len(m.types))
			}
			m.funcTypes = append(m.funcTypes, t)
			m.definedFuncs++
		}
	case secGlobal:
		m.definedGlobals = r.count()
		// A first global that is a mutable i32 set to a constant is how
		// LLVM-built guests (TinyGo, Rust, C) keep their stack pointer.
		m.stackPointer = m.definedGlobals > 0 && len(r.b) > r.pos+3 &&
			r.b[r.pos] == 0x7f && r.b[r.pos+1] == 0x01 && r.b[r.pos+2] == 0x41
		r.pos = len(r.b) // the rewrite reads the rest
	case secCode:
		m.bodies = int(r.count())
		r.pos = len(r.b)
	default:
		return nil
	}
	// The additions go after the entries: bytes left there would be read
	// as an entry.
	if err := trailing(r); err != nil {
		return err
	}
	if m.funcs() > MaxFunctions {
		return fmt.Errorf("%d functions, more than %d", m.funcs(), MaxFunctions)
	}
	if m.globals() > MaxGlobals {
		return fmt.Errorf("%d globals, more than %d", m.globals(), MaxGlobals)
	}
	return nil
}

// checkCounts refuses a section that declares a vector longer than the rest
// of the section could hold, functions with more locals than
// maxFunctionLocals (maxModuleLocals in all), or element segments with more
// entries than Limits.TableEntries in all.
//
// wazero's decoder (v1.12) allocates the declared length of a vector before
// it reads the entries, and reads past the end of a section (it compares
// lengths afterwards). A 14-byte module declaring 2^28 exports made it
// allocate 16 GB, and a Go program whose allocation fails aborts with
// "fatal error: out of memory", which no recover catches: one bad module
// took the whole scheduler down. Checked here, every vector wazero
// allocates is bounded by the size of the module.
func (m *module) checkCounts(id byte, body []byte) error {
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
	case secFunction, secTable, secMemory, secTag, secGlobal, secImport:
		r.count()
	case secExport:
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			r.name()
			r.byte()
			r.u32()
		}
	case secElement:
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			m.elements += r.elementSegment()
			if r.err == nil && m.elements > uint64(m.lim.TableEntries) {
				return fmt.Errorf("the element segments hold more than %d entries, the limit of the tables", m.lim.TableEntries)
			}
		}
	case secCode:
		for n, i := r.count(), uint32(0); i < n && r.err == nil; i++ {
			size := r.u32()
			if r.err == nil && size > MaxFunctionBytes {
				return fmt.Errorf("function %d has a body of %d bytes, more than %d", i, size, MaxFunctionBytes)
			}
			fn := &reader{b: r.bytes(int(size))}
			if r.err != nil {
				return nil // reported by the rewrite
			}
			var sum uint64
			for g, j := fn.count(), uint32(0); j < g && fn.err == nil; j++ {
				sum += uint64(fn.u32())
				fn.valType()
			}
			// A malformed body is reported by the rewrite.
			m.locals += sum
			if sum > maxFunctionLocals {
				return fmt.Errorf("function %d declares %d locals, more than %d", i, sum, maxFunctionLocals)
			}
			if m.locals > maxModuleLocals {
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

// tables rewrites the table section so that every table has a maximum and
// all of them together hold at most Limits.TableEntries entries: the module
// still gets what it declares as a minimum, and the room left is shared
// between the tables that may grow. A table.grow past the maximum fails
// (returns -1) inside the guest, as the format allows.
func (m *module) tables(body []byte) ([]byte, error) {
	type table struct {
		typ      []byte
		min, max uint64 // max 1<<32 when none is declared
	}
	r := &reader{b: body}
	n := r.count()
	ts := make([]table, 0, n)
	var mins uint64
	for i := uint32(0); i < n && r.err == nil; i++ {
		from := r.pos
		r.valType()
		t := table{typ: r.b[from:r.pos]}
		switch flags := r.byte(); flags {
		case 0x00:
			t.min, t.max = uint64(r.u32()), 1<<32
		case 0x01:
			t.min, t.max = uint64(r.u32()), uint64(r.u32())
		default:
			if r.err == nil {
				return nil, fmt.Errorf("table %d: unsupported limits flags %#x", i, flags)
			}
		}
		mins += t.min
		ts = append(ts, t)
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.pos != len(r.b) {
		return nil, fmt.Errorf("trailing bytes after table %d", n)
	}
	limit := uint64(m.lim.TableEntries)
	if mins > limit {
		return nil, fmt.Errorf("the tables need at least %d entries, more than the %d the memory limit allows", mins, limit)
	}
	share := (limit - mins) / uint64(max(1, len(ts)))
	out := appendU32(make([]byte, 0, len(body)+8*len(ts)), n)
	for _, t := range ts {
		out = append(out, t.typ...)
		out = appendU32(appendU32(append(out, 0x01), uint32(t.min)), uint32(min(t.max, t.min+share)))
	}
	return out, nil
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

// elementSegment skips one element segment, in any of its eight encodings,
// and returns its number of entries.
func (r *reader) elementSegment() uint64 {
	var entries uint64
	funcIndices := func() {
		n := r.count()
		entries = uint64(n)
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.u32()
		}
	}
	exprs := func() {
		n := r.count()
		entries = uint64(n)
		for i := uint32(0); i < n && r.err == nil; i++ {
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
	return entries
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
