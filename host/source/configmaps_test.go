package source

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

const ns = "wasmsched-system"

// TestConfigMaps runs the ConfigMap source against a real API server:
// real modules, each split into several ConfigMaps of nearly 1 MiB.
func TestConfigMaps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{TB: t})
	if err != nil {
		t.Fatal(err)
	}
	client := cp.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodepin := testwasm.Bytes(t, "examples/nodepin")
	zone := testwasm.Bytes(t, "examples/zone")

	src := NewConfigMaps(client, ns, "gpu")
	const settle = 500 * time.Millisecond
	src.(*configMapSource).settle = settle
	r := run(t, src)
	seen := 0

	// Nothing yet.
	if e := r.next(t, &seen, 30*time.Second); !e.deleted {
		t.Fatalf("at start: %s, want deleted", e)
	}

	// A module appears: delivered once, whole.
	v1cms, err := Pack("gpu", ns, nodepin)
	if err != nil {
		t.Fatal(err)
	}
	if len(v1cms) < 2 {
		t.Fatalf("nodepin packed into %d ConfigMaps, want several", len(v1cms))
	}
	write(t, client, v1cms)
	e := r.next(t, &seen, 10*time.Second)
	if e.version == nil || e.version.Digest != Digest(nodepin) || string(e.version.Module) != string(nodepin) ||
		e.version.Origin != "configmap wasmsched-system/gpu-0..1" {
		t.Fatalf("after create: %s, want version %s from configmap wasmsched-system/gpu-0..1", e, Digest(nodepin))
	}
	// Another policy's ConfigMaps are not seen.
	other, _ := Pack("gpu-1", ns, zone)
	write(t, client, other)
	r.quiet(t, seen, settle+300*time.Millisecond)

	// Updated to another module, chunk by chunk: delivered once, and the
	// mixed states in between are not reported.
	v2cms, err := Pack("gpu", ns, zone)
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range v2cms {
		write(t, client, []*v1.ConfigMap{cm})
		time.Sleep(150 * time.Millisecond) // longer than the debounce
	}
	e = r.next(t, &seen, 10*time.Second)
	if e.version == nil || e.version.Digest != Digest(zone) {
		t.Fatalf("after update: %s, want version %s", e, Digest(zone))
	}
	r.quiet(t, seen, settle+300*time.Millisecond)

	// A corrupt chunk: reported, naming it, and nothing delivered.
	bad := v2cms[1].DeepCopy()
	bad.BinaryData[DataKey][100] ^= 1
	write(t, client, []*v1.ConfigMap{bad})
	e = r.next(t, &seen, 10*time.Second)
	var ce *ChunkError
	if !errors.As(e.err, &ce) || ce.ConfigMap != "wasmsched-system/gpu-1" {
		t.Fatalf("after corrupting gpu-1: %s, want a *ChunkError naming wasmsched-system/gpu-1", e)
	}
	t.Logf("reported: %v", e.err)
	r.quiet(t, seen, settle+300*time.Millisecond)

	// Re-applying the first version is a rollback.
	write(t, client, v1cms)
	if e = r.next(t, &seen, 10*time.Second); e.version == nil || e.version.Digest != Digest(nodepin) {
		t.Fatalf("after rollback: %s, want version %s", e, Digest(nodepin))
	}

	// All chunks deleted: Deleted, once.
	for _, cm := range v1cms {
		if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if e = r.next(t, &seen, 10*time.Second); !e.deleted {
		t.Fatalf("after deleting all: %s, want deleted", e)
	}
	r.quiet(t, seen, settle)

	// Back again: delivered again, even with the digest delivered before.
	write(t, client, v1cms)
	if e = r.next(t, &seen, 10*time.Second); e.version == nil || e.version.Digest != Digest(nodepin) {
		t.Fatalf("after re-creating: %s, want version %s", e, Digest(nodepin))
	}
}

// Without permission to list ConfigMaps, the informer's errors are
// reported.
func TestConfigMapsForbidden(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cp, err := controlplane.Start(context.Background(), controlplane.Options{TB: t, Authorization: "RBAC"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cp.RestConfig()
	cfg.Impersonate.UserName = "nobody"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, NewConfigMaps(client, ns, "gpu"))
	seen := 0
	e := r.next(t, &seen, 30*time.Second)
	if e.err == nil || !apierrors.IsForbidden(e.err) {
		t.Fatalf("%s, want a forbidden error", e)
	}
	t.Logf("reported: %v", e.err)
}

// write creates or updates ConfigMaps.
func write(t *testing.T, client kubernetes.Interface, cms []*v1.ConfigMap) {
	t.Helper()
	ctx := context.Background()
	api := client.CoreV1().ConfigMaps(ns)
	for _, cm := range cms {
		cur, err := api.Get(ctx, cm.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = api.Create(ctx, cm, metav1.CreateOptions{})
		} else if err == nil {
			up := cm.DeepCopy()
			up.ResourceVersion = cur.ResourceVersion
			_, err = api.Update(ctx, up, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("write %s: %v", cm.Name, err)
		}
	}
}
