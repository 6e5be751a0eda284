package interrupt

// Structural limits, checked before anything is compiled. wazero's compile
// time and memory grow faster than linearly with some of these (measured
// with wazero v1.12 here: a 400 KB module whose br_table targets and block
// nesting ran to the hundreds of thousands took 60 s and 1 GB to compile; 4
// million empty functions in 17.7 KB gzipped took 3.6 GB), so they are
// bounded well above what real guests need: the largest of this project's
// Go guests (examples, probe; Go 1.26, with the protobuf runtime) has about
// 6300 functions, nesting 1150 and br_tables of 1150 targets; TinyGo guests
// far less. The compile itself is bounded too (a child process with limits,
// package engine); these make a hostile module fail at once, with the
// reason, instead of at that limit.
const (
	// MaxModuleBytes is the largest module, as every source caps it.
	MaxModuleBytes = 64 << 20
	// MaxFunctions bounds the functions, imported and defined.
	MaxFunctions = 100_000
	// MaxFunctionBytes bounds one function body.
	MaxFunctionBytes = 4 << 20
	// MaxNesting bounds how deep blocks, loops and ifs nest in a function.
	MaxNesting = 10_000
	// MaxBrTableTargets bounds the targets of one br_table.
	MaxBrTableTargets = 50_000
	// MaxBrTableWork bounds, per function, the sum over its br_tables of
	// targets times the nesting depth at the br_table: the compiler's
	// work on them grows with that product.
	MaxBrTableWork = 50_000_000
	// MaxGlobals bounds the globals (each costs every instance memory).
	MaxGlobals = 100_000
	// MaxTypes bounds the function types.
	MaxTypes = 100_000
)

// Limits on locals, which the binary format run-length encodes: a function
// of six bytes can declare 2^32-1 of them. Web engines allow 50000 locals a
// function; a standard Go guest declares a few dozen.
const (
	maxFunctionLocals = 50000
	maxModuleLocals   = 1 << 22
)
