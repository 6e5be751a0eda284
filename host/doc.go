// Package host is the scheduler side of wasmsched. Its subpackages are:
//
//   - interrupt: rewrites modules so a runaway call can be stopped cheaply;
//   - engine: compiles modules and calls sandboxed instances (the wasm boundary);
//   - pool: bounded pools of instances, one caller each;
//   - convert: scheduler objects to ABI messages;
//   - policy: one loaded policy version, its pool and resident snapshot sync;
//   - source: where module versions come from (file, ConfigMaps, pinned URL);
//   - plugin: the WasmPolicy scheduler plugin (composition, reload, shadow);
//   - eval: offline evaluation, as the scheduler would run policies.
//
// This package itself holds only the benchmarks that measure them together.
package host
