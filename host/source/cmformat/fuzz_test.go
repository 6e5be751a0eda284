package cmformat

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// fuzzSet turns fuzz inputs into ConfigMaps. meta holds one line per
// ConfigMap: its name, then key=value annotations (keys without the
// "wasmsched.io/" prefix) and optionally label=<policy>; payload i goes to
// line i. With fix set, each chunk-sha256 is recomputed from the payload,
// so that mutated payloads reach the gzip decoder.
func fuzzSet(meta string, fix bool, payloads ...[]byte) []*v1.ConfigMap {
	var out []*v1.ConfigMap
	for i, line := range strings.Split(meta, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: f[0], Namespace: ns,
			Labels: map[string]string{LabelPolicy: "gpu"}, Annotations: map[string]string{}}}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			if k == "label" {
				cm.Labels[LabelPolicy] = v
				continue
			}
			cm.Annotations["wasmsched.io/"+k] = v
		}
		if i < len(payloads) && payloads[i] != nil {
			cm.BinaryData = map[string][]byte{DataKey: payloads[i]}
			if fix {
				cm.Annotations[AnnotationChunkSHA256] = Digest(payloads[i])
			}
		}
		out = append(out, cm)
	}
	return out
}

// fuzzSeed is the inverse of fuzzSet for up to three ConfigMaps.
func fuzzSeed(cms []*v1.ConfigMap) (string, [3][]byte) {
	var meta strings.Builder
	var p [3][]byte
	for i, cm := range cms {
		fmt.Fprintf(&meta, "%s", cm.Name)
		for _, k := range []string{AnnotationSHA256, AnnotationChunk, AnnotationChunks, AnnotationEncoding, AnnotationSize, AnnotationChunkSHA256} {
			if v, ok := cm.Annotations[k]; ok {
				fmt.Fprintf(&meta, " %s=%s", strings.TrimPrefix(k, "wasmsched.io/"), v)
			}
		}
		meta.WriteString("\n")
		if i < 3 {
			p[i] = cm.BinaryData[DataKey]
		}
	}
	return meta.String(), p
}

// Bound minimising, or the workers spend most of the time on it:
//
//	go test -run '^$' -fuzz '^FuzzAssemble$' -fuzztime 60s -fuzzminimizetime 10x ./host/source/cmformat/

// FuzzAssemble feeds Assemble damaged chunk sets. It must never panic, and
// whatever it accepts must be what the annotations declare.
func FuzzAssemble(f *testing.F) {
	add := func(cms []*v1.ConfigMap, fix bool) {
		meta, p := fuzzSeed(cms)
		f.Add(meta, fix, p[0], p[1], p[2])
	}
	good := packSmall(f, "gpu", testwasm.FakeModule(1, 3000), 900)
	add(good, false)
	add(good, true)
	add(packSmall(f, "gpu", testwasm.FakeModule(3, 200), 900), false)
	add(packSmall(f, "gpu", []byte("\x00asm\x01\x00\x00\x00"), 900), false)
	add(packSmall(f, "gpu", bytes.Repeat([]byte{0}, 100000), 64), false)
	add(good[1:], false)
	add([]*v1.ConfigMap{good[0], good[2], good[1]}, true)
	// A small bomb: 1 MiB of zeros declared as 100 bytes.
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	f.Add("gpu-0 sha256="+strings.Repeat("a", 64)+" chunk=0 chunks=1 encoding=gzip size=100", true, bomb.Bytes(), []byte(nil), []byte(nil))
	truncated := bytes.Clone(good[2].BinaryData[DataKey][:100])
	meta, p := fuzzSeed(good)
	f.Add(meta, true, p[0], p[1], truncated)
	f.Add("gpu-0 chunks=2 chunk=0\ngpu-1 label=zone", false, []byte{1}, []byte{2}, []byte(nil))

	f.Fuzz(func(t *testing.T, meta string, fix bool, p0, p1, p2 []byte) {
		cms := fuzzSet(meta, fix, p0, p1, p2)
		module, digest, err := Assemble("gpu", cms)
		if err != nil {
			var ce *ChunkError
			switch {
			case errors.As(err, &ce):
				if ce.ConfigMap == "" || ce.Err == nil {
					t.Fatalf("ChunkError without a ConfigMap or cause: %#v", ce)
				}
			case !errors.Is(err, ErrNoChunks):
				t.Fatalf("untyped error %v", err)
			}
			if module != nil || digest != "" {
				t.Fatalf("error %v with a module", err)
			}
			return
		}
		var first *v1.ConfigMap
		for _, cm := range cms {
			if cm.Name == "gpu-0" && cm.Labels[LabelPolicy] == "gpu" {
				first = cm
			}
		}
		if first == nil {
			t.Fatal("assembled without chunk 0")
		}
		if Digest(module) != digest || digest != first.Annotations[AnnotationSHA256] {
			t.Fatalf("digest %s, module's %s, declared %s", digest, Digest(module), first.Annotations[AnnotationSHA256])
		}
		if fmt.Sprint(len(module)) != first.Annotations[AnnotationSize] || len(module) > MaxModuleSize {
			t.Fatalf("module of %d bytes, declared %s", len(module), first.Annotations[AnnotationSize])
		}
	})
}

// FuzzPackAssemble checks the round trip for any module.
func FuzzPackAssemble(f *testing.F) {
	f.Add([]byte("\x00asm\x01\x00\x00\x00"), uint16(64))
	f.Add(testwasm.FakeModule(1, 3000), uint16(900))
	f.Fuzz(func(t *testing.T, module []byte, chunk uint16) {
		if len(module) == 0 {
			return
		}
		cms, err := pack("gpu", ns, module, int(chunk)+1)
		if err != nil {
			if strings.Contains(err.Error(), "chunks, more than") {
				return
			}
			t.Fatal(err)
		}
		got, digest, err := Assemble("gpu", cms)
		if err != nil || !bytes.Equal(got, module) || digest != Digest(module) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
