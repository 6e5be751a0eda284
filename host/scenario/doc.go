// Package scenario reads scenario files and runs them: YAML files that give
// policies (built modules, their settings, weights and failure policies), a
// pod, nodes, pods already placed, cluster objects for policies that read
// them (objects: files or inline objects of any kinds), and the outcome
// expected (each node's
// verdict and score, the ranking, the selected node, Permit's answer, a
// policy failure, a failed cycle). Each scenario runs through host/eval,
// which composes the policies with host/compose as the scheduler's
// WasmPolicy plugin does, and only what a scenario states is compared.
//
// It backs `wasmsched test`; guest/README.md documents the format for
// policy authors. It owns the format, its validation (every error names the
// file, the scenario and the field) and the comparison. It never builds
// modules (a scenario names a .wasm file some build made), never talks to a
// cluster, and never composes policies itself.
package scenario
