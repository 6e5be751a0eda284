// Package source is where policy modules come from: a file, a set of
// ConfigMaps or a pinned URL. Each [Source] delivers verified module
// versions, the current one first and then each change, to the plugin that
// loads them.
//
// The package owns the watching and the sources. The ConfigMap format
// is package [cmformat]'s (documented there), re-exported here ([Pack],
// [Assemble], [ChunkError], the annotations; format.go). The package must
// never compile, run or interpret a module: it hands over bytes whose
// digest it has checked, nothing more.
package source
