package source

import (
	"context"
	"fmt"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	api "github.com/wasmsched/wasmsched/host/api/v1alpha1"
	"github.com/wasmsched/wasmsched/host/source/cmformat"
)

// Content-addressed modules.
//
// A SchedulingPolicy names its module by sha256. When the bytes are in
// ConfigMaps, they are the chunks of "policy" api.ModuleName(sha256) in
// the format of package cmformat, with two differences: they are immutable (a version
// is never overwritten, so a bad push cannot damage a good one) and
// labelled LabelModule, which `wasmsched push` uses to find chunks nothing
// refers to any more. A module shared by several policies is stored once.

// LabelModule marks content-addressed chunks; its value is the module's
// api.ModuleName.
const LabelModule = "wasmsched.io/module"

// PackModule is Pack for a content-addressed module: the chunks of
// api.ModuleName(digest), marked immutable and labelled LabelModule.
func PackModule(namespace string, module []byte) ([]*v1.ConfigMap, error) {
	name := api.ModuleName(Digest(module))
	cms, err := Pack(name, namespace, module)
	if err != nil {
		return nil, err
	}
	yes := true
	for _, cm := range cms {
		cm.Immutable = &yes
		cm.Labels[LabelModule] = name
	}
	return cms, nil
}

// FetchModule reads the content-addressed module sha256 from its chunks in
// namespace (get on ConfigMaps), checks it like Assemble and checks that
// it is the module named. Errors name the ConfigMap concerned
// ([*ChunkError]); a module with no chunk 0 is "not found".
func FetchModule(ctx context.Context, client kubernetes.Interface, namespace, sha256 string) (Version, error) {
	name := api.ModuleName(sha256)
	first := ChunkName(name, 0)
	cms0 := client.CoreV1().ConfigMaps(namespace)
	cm0, err := cms0.Get(ctx, first, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Version{}, &ChunkError{ConfigMap: namespace + "/" + first, Err: fmt.Errorf("module %s not found: no chunk ConfigMap (push it with wasmsched push)", sha256)}
	}
	if err != nil {
		return Version{}, &ChunkError{ConfigMap: namespace + "/" + first, Err: err}
	}
	// How many chunks to get; all there are, once Assemble has taken chunk 0.
	n, ok := cmformat.DeclaredChunks(cm0)
	if !ok {
		n = 1 // Assemble names what is wrong with chunk 0
	}
	cms := []*v1.ConfigMap{cm0}
	for i := 1; i < n; i++ {
		cm, err := cms0.Get(ctx, ChunkName(name, i), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // Assemble reports the missing chunk
		}
		if err != nil {
			return Version{}, &ChunkError{ConfigMap: namespace + "/" + ChunkName(name, i), Err: err}
		}
		cms = append(cms, cm)
	}
	module, digest, err := Assemble(name, cms)
	if err != nil {
		return Version{}, err
	}
	if digest != sha256 {
		return Version{}, &ChunkError{ConfigMap: namespace + "/" + first, Err: fmt.Errorf("holds module %s, not %s", digest, sha256)}
	}
	return Version{Module: module, Digest: digest, Origin: originOf(namespace, name, n), Signatures: chunkSignatures(namespace, cm0)}, nil
}

// FetchURL downloads a module once and checks it is sha256 (the rules of
// NewURL, without retries).
func FetchURL(ctx context.Context, rawURL, sha256 string) (Version, error) {
	if err := ValidateURL(rawURL, sha256); err != nil {
		return Version{}, err
	}
	s := NewURL(rawURL, sha256, &http.Client{Timeout: 2 * time.Minute}).(*urlSource)
	b, err := s.fetch(ctx)
	if err != nil {
		return Version{}, err
	}
	return Version{Module: b, Digest: sha256, Origin: "url " + s.shown}, nil
}

// ReadFile reads a module file once and checks it is sha256.
func ReadFile(path, sha256 string) (Version, error) {
	b, err := readModule(path)
	if err != nil {
		return Version{}, err
	}
	if d := Digest(b); d != sha256 {
		return Version{}, fmt.Errorf("file %s: sha256 mismatch: the file's sha256 is %s, the policy names %s", path, d, sha256)
	}
	sigs, err := ReadDetachedSignatures(path)
	if err != nil {
		return Version{}, err
	}
	return Version{Module: b, Digest: sha256, Origin: "file " + path, Signatures: sigs}, nil
}
