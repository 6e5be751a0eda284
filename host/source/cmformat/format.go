package cmformat

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The ConfigMap format (see the package documentation).
const (
	// ChunkSize is the largest payload of one ConfigMap, in compressed
	// bytes: well under the API server's 1 MiB limit on a ConfigMap's data.
	ChunkSize = 900 << 10
	// MaxModuleSize is the largest module, uncompressed, that any source
	// delivers.
	MaxModuleSize = 64 << 20
	// MaxChunks is the largest number of chunks a module may be split into
	// (a MaxModuleSize module that does not compress needs 73).
	MaxChunks = 100

	// DataKey is the binaryData key holding a chunk's payload.
	DataKey = "module.wasm.gz"
	// Encoding is the only supported value of AnnotationEncoding.
	Encoding = "gzip"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "wasmsched"

	LabelPolicy    = "wasmsched.io/policy"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	AnnotationSHA256      = "wasmsched.io/sha256"
	AnnotationChunk       = "wasmsched.io/chunk"
	AnnotationChunks      = "wasmsched.io/chunks"
	AnnotationEncoding    = "wasmsched.io/encoding"
	AnnotationSize        = "wasmsched.io/size"
	AnnotationChunkSHA256 = "wasmsched.io/chunk-sha256"
)

// ErrNoChunks is returned by [Assemble] when no ConfigMap of the policy is
// given.
var ErrNoChunks = errors.New("no ConfigMaps")

// ChunkError is a problem with one ConfigMap of a policy. ConfigMap is
// "namespace/name", so that a caller can post an Event on it.
type ChunkError struct {
	ConfigMap string
	// ResourceVersion is the ConfigMap's, when it exists: an Event about
	// it can name the very object at fault.
	ResourceVersion string
	Err             error
}

func (e *ChunkError) Error() string { return "configmap " + e.ConfigMap + ": " + e.Err.Error() }

// Unwrap returns the underlying problem.
func (e *ChunkError) Unwrap() error { return e.Err }

// ChunkName is the name of chunk i of a policy's ConfigMaps.
func ChunkName(policy string, i int) string { return policy + "-" + strconv.Itoa(i) }

// ValidateName checks that a policy name can be delivered in ConfigMaps: it
// must be a valid label value and its chunk names valid ConfigMap names,
// i.e. lower-case letters, digits, '-' and '.', at most 63 characters,
// starting and ending with a letter or digit.
func ValidateName(policy string) error {
	if policy == "" {
		return errors.New("policy name is empty")
	}
	if errs := validation.IsValidLabelValue(policy); len(errs) > 0 {
		return fmt.Errorf("policy name %q: %s", policy, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(ChunkName(policy, MaxChunks-1)); len(errs) > 0 {
		return fmt.Errorf("policy name %q: %s", policy, strings.Join(errs, "; "))
	}
	return nil
}

// Digest returns the hex sha256 of a module, the digest every source
// reports.
func Digest(module []byte) string {
	sum := sha256.Sum256(module)
	return hex.EncodeToString(sum[:])
}

// Pack compresses a module and splits it into the ConfigMaps that deliver
// it as policy in namespace, chunk 0 first. The result is deterministic:
// packing the same module twice gives the same ConfigMaps.
func Pack(policy, namespace string, module []byte) ([]*v1.ConfigMap, error) {
	return pack(policy, namespace, module, ChunkSize)
}

func pack(policy, namespace string, module []byte, chunkSize int) ([]*v1.ConfigMap, error) {
	if err := ValidateName(policy); err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if len(module) == 0 {
		return nil, errors.New("module is empty")
	}
	if len(module) > MaxModuleSize {
		return nil, fmt.Errorf("module is %d bytes, more than the %d allowed", len(module), MaxModuleSize)
	}
	var buf bytes.Buffer
	// gzip's default level: for a Go-built module of 4.6 MB, 177 ms and
	// 1 230 635 bytes, where its best compression takes 452 ms for 1 222 280
	// (0.7 % smaller). Every push and pack pays it, and a chunk holds 900 KiB.
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(module); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	z := buf.Bytes()
	n := (len(z) + chunkSize - 1) / chunkSize
	if n > MaxChunks {
		return nil, fmt.Errorf("module needs %d chunks, more than the %d allowed", n, MaxChunks)
	}
	digest := Digest(module)
	out := make([]*v1.ConfigMap, n)
	for i := range n {
		payload := z[i*chunkSize : min((i+1)*chunkSize, len(z))]
		out[i] = &v1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{
				Name:      ChunkName(policy, i),
				Namespace: namespace,
				Labels:    map[string]string{LabelPolicy: policy, LabelManagedBy: ManagedBy},
				Annotations: map[string]string{
					AnnotationSHA256:      digest,
					AnnotationChunk:       strconv.Itoa(i),
					AnnotationChunks:      strconv.Itoa(n),
					AnnotationEncoding:    Encoding,
					AnnotationSize:        strconv.Itoa(len(module)),
					AnnotationChunkSHA256: Digest(payload),
				},
			},
			BinaryData: map[string][]byte{DataKey: bytes.Clone(payload)},
		}
	}
	return out, nil
}

// header is what chunk annotations declare.
type header struct {
	digest string
	index  int
	chunks int
	size   int
}

// Assemble reassembles and verifies the module of policy from its
// ConfigMaps, by the rules in the package documentation, and returns it
// with its digest (hex sha256). cms may hold other ConfigMaps, in any
// order; nil entries are skipped. Errors are [*ChunkError] values naming
// the ConfigMap concerned, or [ErrNoChunks]. Assemble never allocates more
// than the declared size (at most MaxModuleSize) for the module.
func Assemble(policy string, cms []*v1.ConfigMap) (module []byte, digest string, err error) {
	byIndex := map[int]*v1.ConfigMap{}
	lowest := -1
	for _, cm := range cms {
		if cm == nil || cm.Labels[LabelPolicy] != policy {
			continue
		}
		i, ok := chunkIndex(policy, cm.Name)
		if !ok {
			continue
		}
		if prev, dup := byIndex[i]; dup {
			return nil, "", chunkErr(cm, fmt.Errorf("duplicate chunk %d (also in %s)", i, key(prev)))
		}
		byIndex[i] = cm
		if lowest < 0 || i < lowest {
			lowest = i
		}
	}
	if len(byIndex) == 0 {
		return nil, "", ErrNoChunks
	}
	first, ok := byIndex[0]
	if !ok {
		return nil, "", chunkErr(byIndex[lowest], fmt.Errorf("missing chunk 0: no ConfigMap %s", ChunkName(policy, 0)))
	}
	h0, err := parseHeader(first, 0)
	if err != nil {
		return nil, "", chunkErr(first, err)
	}
	parts := make([]*v1.ConfigMap, h0.chunks)
	parts[0] = first
	for i := 1; i < h0.chunks; i++ {
		cm, ok := byIndex[i]
		if !ok {
			return nil, "", chunkErr(first, fmt.Errorf("missing chunk %d of %d: no ConfigMap %s", i, h0.chunks, ChunkName(policy, i)))
		}
		if d := cm.Annotations[AnnotationSHA256]; d != h0.digest {
			return nil, "", chunkErr(cm, fmt.Errorf("missing chunk %d of %d: this ConfigMap holds a chunk of sha256 %q, %s is sha256 %s",
				i, h0.chunks, d, first.Name, h0.digest))
		}
		h, err := parseHeader(cm, i)
		if err != nil {
			return nil, "", chunkErr(cm, err)
		}
		switch {
		case h.chunks != h0.chunks:
			err = inconsistent(AnnotationChunks, cm, first)
		case h.size != h0.size:
			err = inconsistent(AnnotationSize, cm, first)
		}
		if err != nil {
			return nil, "", chunkErr(cm, err)
		}
		parts[i] = cm
	}
	for _, cm := range parts {
		if err := checkPayload(cm); err != nil {
			return nil, "", chunkErr(cm, err)
		}
	}
	module, err = decompress(parts, h0.size)
	if err != nil {
		return nil, "", err
	}
	if got := Digest(module); got != h0.digest {
		return nil, "", chunkErr(first, fmt.Errorf("sha256 mismatch: the module is sha256 %s, the annotations declare %s", got, h0.digest))
	}
	return module, h0.digest, nil
}

// chunkIndex parses i from a name policy-i.
func chunkIndex(policy, name string) (int, bool) {
	s, ok := strings.CutPrefix(name, policy+"-")
	if !ok {
		return 0, false
	}
	i, ok := parseCount(s)
	return i, ok && i < MaxChunks
}

// parseCount parses a canonical non-negative decimal below 10^9.
func parseCount(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// DeclaredChunks returns the number of chunks that cm's annotation
// wasmsched.io/chunks declares, or false when it is not a number in
// 1..MaxChunks. It checks nothing else: only [Assemble] tells whether those
// chunks are there and agree.
func DeclaredChunks(cm *v1.ConfigMap) (int, bool) {
	n, ok := parseCount(cm.Annotations[AnnotationChunks])
	return n, ok && n >= 1 && n <= MaxChunks
}

func parseHeader(cm *v1.ConfigMap, index int) (header, error) {
	a := cm.Annotations
	var h header
	for _, k := range []string{AnnotationSHA256, AnnotationChunk, AnnotationChunks, AnnotationEncoding, AnnotationSize, AnnotationChunkSHA256} {
		if _, ok := a[k]; !ok {
			return h, fmt.Errorf("annotation %s is missing", k)
		}
	}
	h.digest = a[AnnotationSHA256]
	if !IsDigest(h.digest) {
		return h, fmt.Errorf("annotation %s: %q is not a hex sha256", AnnotationSHA256, a[AnnotationSHA256])
	}
	var ok bool
	if h.chunks, ok = DeclaredChunks(cm); !ok {
		return h, fmt.Errorf("annotation %s: %q is not a number in 1..%d", AnnotationChunks, a[AnnotationChunks], MaxChunks)
	}
	if h.index, ok = parseCount(a[AnnotationChunk]); !ok || h.index != index {
		return h, fmt.Errorf("annotation %s is %q, the name says chunk %d", AnnotationChunk, a[AnnotationChunk], index)
	}
	if e := a[AnnotationEncoding]; e != Encoding {
		return h, fmt.Errorf("annotation %s: %q is not supported (want %s)", AnnotationEncoding, e, Encoding)
	}
	s := a[AnnotationSize]
	if h.size, ok = parseCount(s); !ok || h.size < 1 {
		if len(s) > 9 && strings.Trim(s, "0123456789") == "" && s[0] != '0' {
			return h, fmt.Errorf("oversized: annotation %s declares %s bytes, more than the %d allowed", AnnotationSize, s, MaxModuleSize)
		}
		return h, fmt.Errorf("annotation %s: %q is not a positive number", AnnotationSize, s)
	}
	if h.size > MaxModuleSize {
		return h, fmt.Errorf("oversized: annotation %s declares %d bytes, more than the %d allowed", AnnotationSize, h.size, MaxModuleSize)
	}
	if d := a[AnnotationChunkSHA256]; !IsDigest(d) {
		return h, fmt.Errorf("annotation %s: %q is not a hex sha256", AnnotationChunkSHA256, d)
	}
	return h, nil
}

// IsDigest reports whether s is a digest as [Digest] writes it: 64
// lower-case hex digits.
func IsDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func inconsistent(k string, cm, first *v1.ConfigMap) error {
	return fmt.Errorf("inconsistent annotations: %s is %q here, %q on %s", k, cm.Annotations[k], first.Annotations[k], first.Name)
}

func checkPayload(cm *v1.ConfigMap) error {
	p, ok := cm.BinaryData[DataKey]
	switch {
	case !ok:
		return fmt.Errorf("binaryData %q is missing", DataKey)
	case len(p) == 0:
		return fmt.Errorf("binaryData %q is empty", DataKey)
	case len(p) > ChunkSize:
		return fmt.Errorf("oversized: binaryData %q is %d bytes, more than the %d allowed", DataKey, len(p), ChunkSize)
	}
	if got, want := Digest(p), cm.Annotations[AnnotationChunkSHA256]; got != want {
		return fmt.Errorf("chunk sha256 mismatch: the payload is sha256 %s, annotation %s declares %s", got, AnnotationChunkSHA256, want)
	}
	return nil
}

// maxRatio bounds what deflate can inflate one byte to (about 1032 for
// runs of one byte); a declared size beyond it cannot be true.
const maxRatio = 1100

// decompress inflates the concatenated payloads of parts into exactly size
// bytes, attributing stream errors to the chunk being read. It allocates
// one buffer of size+1 bytes, after checking that the payloads could hold
// that much: a stream that inflates beyond what is declared costs no more
// than the declaration.
func decompress(parts []*v1.ConfigMap, size int) ([]byte, error) {
	r := &chunkReader{parts: parts}
	fail := func(err error) ([]byte, error) { return nil, chunkErr(parts[r.current()], err) }
	if z := r.remaining(); size > maxRatio*z+1024 {
		return nil, chunkErr(parts[0], fmt.Errorf("size mismatch: annotation %s declares %d bytes, more than %d compressed bytes can hold", AnnotationSize, size, z))
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fail(fmt.Errorf("bad gzip data: %w", err))
	}
	zr.Multistream(false)
	buf := make([]byte, size+1)
	n := 0
	for n < len(buf) {
		m, err := zr.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		var corrupt flate.CorruptInputError
		if errors.As(err, &corrupt) {
			_, off := r.position()
			return fail(fmt.Errorf("bad gzip data: corrupt deflate data before byte %d of this chunk", off))
		}
		if err != nil {
			return fail(fmt.Errorf("bad gzip data: %w", err))
		}
	}
	if n > size {
		return nil, chunkErr(parts[0], fmt.Errorf("oversized: the module inflates to more than the %d bytes annotation %s declares", size, AnnotationSize))
	}
	if r.remaining() > 0 {
		return fail(fmt.Errorf("bad gzip data: %d bytes of trailing data after the gzip stream", r.remaining()))
	}
	if n != size {
		return nil, chunkErr(parts[0], fmt.Errorf("size mismatch: the module is %d bytes, annotation %s declares %d", n, AnnotationSize, size))
	}
	return buf[:n:n], nil
}

// chunkReader reads the payloads of parts in order. It is an io.ByteReader,
// so gzip reads no further ahead than it needs and current() names the
// chunk a decoding error was found in.
type chunkReader struct {
	parts []*v1.ConfigMap
	i     int // current part
	off   int // offset in it
}

func (r *chunkReader) payload() []byte { return r.parts[r.i].BinaryData[DataKey] }

// advance skips exhausted parts and reports whether bytes are left.
func (r *chunkReader) advance() bool {
	for r.off >= len(r.payload()) {
		if r.i == len(r.parts)-1 {
			return false
		}
		r.i++
		r.off = 0
	}
	return true
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !r.advance() {
		return 0, io.EOF
	}
	n := copy(p, r.payload()[r.off:])
	r.off += n
	return n, nil
}

func (r *chunkReader) ReadByte() (byte, error) {
	if !r.advance() {
		return 0, io.EOF
	}
	b := r.payload()[r.off]
	r.off++
	return b, nil
}

// position is the part the last byte was read from and the offset after
// that byte in it.
func (r *chunkReader) position() (part, off int) {
	if r.off == 0 && r.i > 0 {
		return r.i - 1, len(r.parts[r.i-1].BinaryData[DataKey])
	}
	return r.i, r.off
}

func (r *chunkReader) current() int {
	i, _ := r.position()
	return i
}

func (r *chunkReader) remaining() int {
	n := len(r.payload()) - r.off
	for _, p := range r.parts[r.i+1:] {
		n += len(p.BinaryData[DataKey])
	}
	return n
}

func key(cm *v1.ConfigMap) string { return cm.Namespace + "/" + cm.Name }

func chunkErr(cm *v1.ConfigMap, err error) error {
	return &ChunkError{ConfigMap: key(cm), ResourceVersion: cm.ResourceVersion, Err: err}
}
