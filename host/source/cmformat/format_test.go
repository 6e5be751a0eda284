package cmformat

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/testwasm"
)

const ns = "wasmsched-system"

// packSmall packs with a small chunk size, to get several chunks from
// little data.
func packSmall(t testing.TB, policy string, module []byte, chunkSize int) []*v1.ConfigMap {
	t.Helper()
	cms, err := pack(policy, ns, module, chunkSize)
	if err != nil {
		t.Fatal(err)
	}
	return cms
}

func TestPackAssembleRealModule(t *testing.T) {
	module := testwasm.Bytes(t, "examples/nodepin")
	cms, err := Pack("nodepin", ns, module)
	if err != nil {
		t.Fatal(err)
	}
	if len(cms) < 2 {
		t.Fatalf("a %d byte module packed into %d ConfigMap(s); want several", len(module), len(cms))
	}
	digest := Digest(module)
	for i, cm := range cms {
		if want := fmt.Sprintf("nodepin-%d", i); cm.Name != want || cm.Namespace != ns {
			t.Errorf("chunk %d is %s/%s, want %s/%s", i, cm.Namespace, cm.Name, ns, want)
		}
		wantLabels := map[string]string{LabelPolicy: "nodepin", LabelManagedBy: "wasmsched"}
		if !reflect.DeepEqual(cm.Labels, wantLabels) {
			t.Errorf("%s: labels %v, want %v", cm.Name, cm.Labels, wantLabels)
		}
		payload := cm.BinaryData[DataKey]
		wantAnn := map[string]string{
			AnnotationSHA256: digest, AnnotationChunk: fmt.Sprint(i), AnnotationChunks: fmt.Sprint(len(cms)),
			AnnotationEncoding: "gzip", AnnotationSize: fmt.Sprint(len(module)), AnnotationChunkSHA256: Digest(payload),
		}
		if !reflect.DeepEqual(cm.Annotations, wantAnn) {
			t.Errorf("%s: annotations %v, want %v", cm.Name, cm.Annotations, wantAnn)
		}
		if len(payload) > ChunkSize || len(cm.Data) > 0 {
			t.Errorf("%s: payload of %d bytes, data %v", cm.Name, len(payload), cm.Data)
		}
		// What the API server stores (protobuf) and what it validates (the
		// data's size) stay under 1 MiB.
		pb, err := cm.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(cm)
		if len(pb) >= 1<<20 {
			t.Errorf("%s: marshalled (protobuf) size %d >= 1 MiB", cm.Name, len(pb))
		}
		t.Logf("%s: payload %d bytes, protobuf %d bytes, JSON %d bytes", cm.Name, len(payload), len(pb), len(js))
	}
	// Any order, with unrelated ConfigMaps around.
	shuffled := []*v1.ConfigMap{cms[len(cms)-1], {}, nil}
	shuffled = append(shuffled, cms[:len(cms)-1]...)
	got, gotDigest, err := Assemble("nodepin", shuffled)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, module) || gotDigest != digest {
		t.Fatalf("assembled %d bytes, digest %s; want %d bytes, %s", len(got), gotDigest, len(module), digest)
	}
	again, _ := Pack("nodepin", ns, module)
	if !reflect.DeepEqual(again, cms) {
		t.Error("packing the same module twice gave different ConfigMaps")
	}
}

func TestPackRejects(t *testing.T) {
	for _, tc := range []struct {
		policy, namespace string
		module            []byte
		want              string
	}{
		{"gpu", ns, nil, "module is empty"},
		{"gpu", ns, make([]byte, MaxModuleSize+1), "module is 67108865 bytes, more than the 67108864 allowed"},
		{"", ns, []byte{1}, "policy name is empty"},
		{"GPU", ns, []byte{1}, `policy name "GPU": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters`},
		{strings.Repeat("a", 64), ns, []byte{1}, "must be no more than 63 bytes"},
		{"gpu", "Bad_NS", []byte{1}, `namespace "Bad_NS": a lowercase RFC 1123 label must consist of`},
	} {
		_, err := Pack(tc.policy, tc.namespace, tc.module)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Pack(%q, %q, %d bytes): %v, want %q", tc.policy, tc.namespace, len(tc.module), err, tc.want)
		}
	}
}

// TestAssembleErrors damages a 3-chunk set in every way and checks the
// exact error, which names the ConfigMap concerned.
func TestAssembleErrors(t *testing.T) {
	module := testwasm.FakeModule(1, 3000)
	good := packSmall(t, "gpu", module, 900)
	if len(good) != 3 {
		t.Fatalf("packed into %d chunks, want 3", len(good))
	}
	digest := Digest(module)
	other := testwasm.FakeModule(2, 5000)
	older := packSmall(t, "gpu", other, 900) // a bigger, older version
	if len(older) < 4 {
		t.Fatalf("older version has %d chunks, want 4 or more", len(older))
	}
	otherDigest := Digest(other)
	payload := func(cms []*v1.ConfigMap, i int) []byte { return cms[i].BinaryData[DataKey] }
	// setPayload replaces a payload and keeps its chunk digest right, to
	// reach the gzip checks.
	setPayload := func(cm *v1.ConfigMap, p []byte) {
		cm.BinaryData[DataKey] = p
		cm.Annotations[AnnotationChunkSHA256] = Digest(p)
	}
	annotateAll := func(cms []*v1.ConfigMap, k, v string) {
		for _, cm := range cms {
			cm.Annotations[k] = v
		}
	}
	// A gzip stream whose deflate data is damaged inside chunk 1.
	damaged := bytes.Clone(slicesConcat(payload(good, 0), payload(good, 1), payload(good, 2)))
	for i := 950; i < 960; i++ {
		damaged[i] = 0xff
	}

	for _, tc := range []struct {
		name   string
		mutate func(cms []*v1.ConfigMap) []*v1.ConfigMap
		want   string
	}{
		{"none", func([]*v1.ConfigMap) []*v1.ConfigMap { return nil }, "no ConfigMaps"},
		{"other policy only", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			return packSmall(t, "zone", module, 900)
		}, "no ConfigMaps"},
		{"missing chunk 1", func(cms []*v1.ConfigMap) []*v1.ConfigMap { return []*v1.ConfigMap{cms[0], cms[2]} },
			"configmap wasmsched-system/gpu-0: missing chunk 1 of 3: no ConfigMap gpu-1"},
		{"missing last chunk", func(cms []*v1.ConfigMap) []*v1.ConfigMap { return cms[:2] },
			"configmap wasmsched-system/gpu-0: missing chunk 2 of 3: no ConfigMap gpu-2"},
		{"missing chunk 0", func(cms []*v1.ConfigMap) []*v1.ConfigMap { return cms[1:] },
			"configmap wasmsched-system/gpu-1: missing chunk 0: no ConfigMap gpu-0"},
		{"chunk 1 of another version", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			cms[1] = older[1]
			return cms
		}, fmt.Sprintf(`configmap wasmsched-system/gpu-1: missing chunk 1 of 3: this ConfigMap holds a chunk of sha256 "%s", gpu-0 is sha256 %s`, otherDigest, digest)},
		{"chunk 1 mislabelled", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			cms[1].Labels[LabelPolicy] = "zone"
			return cms
		}, "configmap wasmsched-system/gpu-0: missing chunk 1 of 3: no ConfigMap gpu-1"},
		{"duplicate chunk", func(cms []*v1.ConfigMap) []*v1.ConfigMap { return append(cms, cms[1].DeepCopy()) },
			"configmap wasmsched-system/gpu-1: duplicate chunk 1 (also in wasmsched-system/gpu-1)"},
		{"sha256 not hex", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			cms[0].Annotations[AnnotationSHA256] = "sha256:abc"
			return cms
		}, `configmap wasmsched-system/gpu-0: annotation wasmsched.io/sha256: "sha256:abc" is not a hex sha256`},
		{"annotation missing", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			delete(cms[0].Annotations, AnnotationEncoding)
			return cms
		}, "configmap wasmsched-system/gpu-0: annotation wasmsched.io/encoding is missing"},
		{"annotation missing on chunk 2", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			delete(cms[2].Annotations, AnnotationChunkSHA256)
			return cms
		}, "configmap wasmsched-system/gpu-2: annotation wasmsched.io/chunk-sha256 is missing"},
		{"chunks not a number", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationChunks, "03")
			return cms
		}, `configmap wasmsched-system/gpu-0: annotation wasmsched.io/chunks: "03" is not a number in 1..100`},
		{"too many chunks", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationChunks, "101")
			return cms
		}, `configmap wasmsched-system/gpu-0: annotation wasmsched.io/chunks: "101" is not a number in 1..100`},
		{"wrong index", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			cms[1].Annotations[AnnotationChunk] = "2"
			return cms
		}, `configmap wasmsched-system/gpu-1: annotation wasmsched.io/chunk is "2", the name says chunk 1`},
		{"unsupported encoding", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationEncoding, "zstd")
			return cms
		}, `configmap wasmsched-system/gpu-0: annotation wasmsched.io/encoding: "zstd" is not supported (want gzip)`},
		{"inconsistent chunks", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			cms[2].Annotations[AnnotationChunks] = "4"
			return cms
		}, `configmap wasmsched-system/gpu-2: inconsistent annotations: wasmsched.io/chunks is "4" here, "3" on gpu-0`},
		{"inconsistent size", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			cms[1].Annotations[AnnotationSize] = "3001"
			return cms
		}, `configmap wasmsched-system/gpu-1: inconsistent annotations: wasmsched.io/size is "3001" here, "3000" on gpu-0`},
		{"size not a number", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationSize, "-1")
			return cms
		}, `configmap wasmsched-system/gpu-0: annotation wasmsched.io/size: "-1" is not a positive number`},
		{"declared size over the cap", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationSize, "67108865")
			return cms
		}, "configmap wasmsched-system/gpu-0: oversized: annotation wasmsched.io/size declares 67108865 bytes, more than the 67108864 allowed"},
		{"declared size far over the cap", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationSize, "99999999999999999999")
			return cms
		}, "configmap wasmsched-system/gpu-0: oversized: annotation wasmsched.io/size declares 99999999999999999999 bytes, more than the 67108864 allowed"},
		{"payload missing", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			delete(cms[1].BinaryData, DataKey)
			cms[1].Data = map[string]string{DataKey: "text"}
			return cms
		}, `configmap wasmsched-system/gpu-1: binaryData "module.wasm.gz" is missing`},
		{"payload empty", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			setPayload(cms[2], []byte{})
			return cms
		}, `configmap wasmsched-system/gpu-2: binaryData "module.wasm.gz" is empty`},
		{"payload too big", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			setPayload(cms[1], make([]byte, ChunkSize+1))
			return cms
		}, `configmap wasmsched-system/gpu-1: oversized: binaryData "module.wasm.gz" is 921601 bytes, more than the 921600 allowed`},
		{"payload damaged", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			cms[1].BinaryData[DataKey][10] ^= 1
			return cms
		}, fmt.Sprintf("configmap wasmsched-system/gpu-1: chunk sha256 mismatch: the payload is sha256 %s, annotation wasmsched.io/chunk-sha256 declares %s",
			Digest(flip(payload(good, 1), 10)), Digest(payload(good, 1)))},
		{"bad gzip header", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			setPayload(cms[0], flip(payload(cms, 0), 0))
			return cms
		}, "configmap wasmsched-system/gpu-0: bad gzip data: gzip: invalid header"},
		{"bad deflate data in chunk 1", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			setPayload(cms[0], damaged[:900])
			setPayload(cms[1], damaged[900:1800])
			setPayload(cms[2], damaged[1800:])
			return cms
		}, "configmap wasmsched-system/gpu-1: bad gzip data: corrupt deflate data before byte 52 of this chunk"},
		{"truncated", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			p := payload(cms, 2)
			setPayload(cms[2], p[:len(p)-5])
			return cms
		}, "configmap wasmsched-system/gpu-2: bad gzip data: unexpected EOF"},
		{"trailing data", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			setPayload(cms[2], append(bytes.Clone(payload(cms, 2)), 1, 2, 3))
			return cms
		}, "configmap wasmsched-system/gpu-2: bad gzip data: 3 bytes of trailing data after the gzip stream"},
		{"size larger than the module", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationSize, "3001")
			return cms
		}, "configmap wasmsched-system/gpu-0: size mismatch: the module is 3000 bytes, annotation wasmsched.io/size declares 3001"},
		{"size smaller than the module", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationSize, "2999")
			return cms
		}, "configmap wasmsched-system/gpu-0: oversized: the module inflates to more than the 2999 bytes annotation wasmsched.io/size declares"},
		{"size more than the payload can hold", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationSize, "50000000")
			return cms
		}, "configmap wasmsched-system/gpu-0: size mismatch: annotation wasmsched.io/size declares 50000000 bytes, more than 2546 compressed bytes can hold"},
		{"digest mismatch", func(cms []*v1.ConfigMap) []*v1.ConfigMap {
			annotateAll(cms, AnnotationSHA256, otherDigest)
			return cms
		}, fmt.Sprintf("configmap wasmsched-system/gpu-0: sha256 mismatch: the module is sha256 %s, the annotations declare %s", digest, otherDigest)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cms := tc.mutate(clone(good))
			got, d, err := Assemble("gpu", cms)
			if err == nil {
				t.Fatalf("assembled %d bytes (%s), want error %q", len(got), d, tc.want)
			}
			if err.Error() != tc.want {
				t.Fatalf("error\n%s\nwant\n%s", err, tc.want)
			}
			var ce *ChunkError
			if errors.As(err, &ce) != (tc.want != "no ConfigMaps") {
				t.Fatalf("error %T: want a *ChunkError exactly when a ConfigMap is concerned", err)
			}
			if !errors.As(err, &ce) && !errors.Is(err, ErrNoChunks) {
				t.Fatalf("error %v is neither a *ChunkError nor ErrNoChunks", err)
			}
		})
	}
}

// Chunks of other modules and beyond N are ignored: a leftover gpu-3 of an
// older, bigger version does not matter.
func TestAssembleIgnoresLeftovers(t *testing.T) {
	module := testwasm.FakeModule(1, 3000)
	older := packSmall(t, "gpu", testwasm.FakeModule(2, 5000), 900)
	cms := append(packSmall(t, "gpu", module, 900), older[3:]...)
	// Not chunks of gpu: other names, another policy's label.
	extra := cms[0].DeepCopy()
	extra.Name = "gpu-01"
	notOurs := cms[1].DeepCopy()
	notOurs.Name = "gpu-x"
	cms = append(cms, extra, notOurs, packSmall(t, "gpu-1", module, 900)[0])
	got, d, err := Assemble("gpu", cms)
	if err != nil || !bytes.Equal(got, module) || d != Digest(module) {
		t.Fatalf("got %d bytes, %s, %v", len(got), d, err)
	}
}

// A zip bomb costs no more than what its annotations declare.
func TestAssembleZipBomb(t *testing.T) {
	bomb := zeroBomb(256) // 256 MiB of zeros
	if len(bomb) > ChunkSize {
		t.Fatalf("bomb is %d bytes compressed", len(bomb))
	}
	for _, size := range []int{1000, MaxModuleSize} {
		cm := packSmall(t, "gpu", []byte("x"), 100)[0]
		cm.BinaryData[DataKey] = bomb
		cm.Annotations[AnnotationChunkSHA256] = Digest(bomb)
		cm.Annotations[AnnotationSize] = fmt.Sprint(size)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err := Assemble("gpu", []*v1.ConfigMap{cm})
		runtime.ReadMemStats(&after)
		want := fmt.Sprintf("configmap wasmsched-system/gpu-0: oversized: the module inflates to more than the %d bytes annotation wasmsched.io/size declares", size)
		if err == nil || err.Error() != want {
			t.Fatalf("size %d: %v, want %q", size, err, want)
		}
		// One buffer of size+1 bytes, plus the decompressor's own state.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(size+1<<20) {
			t.Errorf("size %d: Assemble allocated %d bytes", size, alloc)
		}
	}
}

// zeroBomb is a valid gzip stream of mib MiB of zeros, made without
// compressing them all: one deflate block sequence for 1 MiB, repeated.
func zeroBomb(mib int) []byte {
	var mb bytes.Buffer
	fw, _ := flate.NewWriter(&mb, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	fw.Write(zeros)
	fw.Flush() // byte-aligned, not final
	var out bytes.Buffer
	out.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 0xff})
	crc := uint32(0)
	for range mib {
		out.Write(mb.Bytes())
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	out.Write([]byte{1, 0, 0, 0xff, 0xff}) // an empty final stored block
	out.Write(binary.LittleEndian.AppendUint32(nil, crc))
	out.Write(binary.LittleEndian.AppendUint32(nil, uint32(mib<<20)))
	return out.Bytes()
}

func TestDeclaredChunks(t *testing.T) {
	for v, want := range map[string]int{"1": 1, "100": 100, "0": 0, "101": 0, "03": 0, "+3": 0, "": 0} {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationChunks: v}}}
		if n, ok := DeclaredChunks(cm); ok != (want > 0) || n != want && ok {
			t.Errorf("DeclaredChunks(%q) = %d, %v; want %d", v, n, ok, want)
		}
	}
}

func TestIsDigest(t *testing.T) {
	d := Digest([]byte("x"))
	for s, want := range map[string]bool{d: true, strings.ToUpper(d): false, d[1:]: false, "sha256:" + d: false, "": false} {
		if IsDigest(s) != want {
			t.Errorf("IsDigest(%q) = %v", s, !want)
		}
	}
}

func TestChunkErrorUnwrap(t *testing.T) {
	inner := errors.New("boom")
	var err error = &ChunkError{ConfigMap: "ns/gpu-0", Err: inner}
	if !errors.Is(err, inner) || err.Error() != "configmap ns/gpu-0: boom" {
		t.Fatalf("%v", err)
	}
}

func clone(cms []*v1.ConfigMap) []*v1.ConfigMap {
	out := make([]*v1.ConfigMap, len(cms))
	for i, cm := range cms {
		out[i] = cm.DeepCopy()
	}
	return out
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 1
	return b
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestZeroBombIsValid(t *testing.T) {
	zr, err := gzip.NewReader(bytes.NewReader(zeroBomb(3)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || len(b) != 3<<20 || bytes.Count(b, []byte{0}) != len(b) {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
}
