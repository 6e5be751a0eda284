package cmformat_test

import (
	"fmt"

	"github.com/wasmsched/wasmsched/host/source/cmformat"
)

// Pack splits a module into ConfigMaps; Assemble reads them back, verified.
func ExamplePack() {
	module := []byte("\x00asm\x01\x00\x00\x00") // the smallest module
	cms, err := cmformat.Pack("gpu", "wasmsched-system", module)
	if err != nil {
		panic(err)
	}
	for _, cm := range cms {
		fmt.Println(cm.Namespace+"/"+cm.Name, cm.Annotations[cmformat.AnnotationChunk]+"/"+cm.Annotations[cmformat.AnnotationChunks],
			cm.Annotations[cmformat.AnnotationSize], cm.Annotations[cmformat.AnnotationSHA256][:12])
	}
	got, digest, err := cmformat.Assemble("gpu", cms)
	fmt.Println(len(got), digest == cmformat.Digest(module), err)
	// Output:
	// wasmsched-system/gpu-0 0/1 8 93a44bbb96c7
	// 8 true <nil>
}
