package source_test

import (
	"fmt"

	"github.com/wasmsched/wasmsched/host/source"
)

// Pack splits a module into ConfigMaps; Assemble reads them back, verified.
func ExamplePack() {
	module := []byte("\x00asm\x01\x00\x00\x00") // the smallest module
	cms, err := source.Pack("gpu", "wasmsched-system", module)
	if err != nil {
		panic(err)
	}
	for _, cm := range cms {
		fmt.Println(cm.Namespace+"/"+cm.Name, cm.Annotations[source.AnnotationChunk]+"/"+cm.Annotations[source.AnnotationChunks],
			cm.Annotations[source.AnnotationSize], cm.Annotations[source.AnnotationSHA256][:12])
	}
	got, digest, err := source.Assemble("gpu", cms)
	fmt.Println(len(got), digest == source.Digest(module), err)
	// Output:
	// wasmsched-system/gpu-0 0/1 8 93a44bbb96c7
	// 8 true <nil>
}
