package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmsched/wasmsched/host/source"
	"github.com/wasmsched/wasmsched/internal/controlplane"
	"github.com/wasmsched/wasmsched/internal/testwasm"
)

// pushEnv is a control plane with the scheduler's namespace and a
// kubeconfig for it.
func pushEnv(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	controlplane.QuietLogs()
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{TB: t})
	if err != nil {
		t.Fatal(err)
	}
	client := cp.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: defaultNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	return client, kubeconfig
}

// installed assembles the policy from what the API server holds.
func installed(t *testing.T, client kubernetes.Interface, policy string) ([]byte, []string) {
	t.Helper()
	list, err := client.CoreV1().ConfigMaps(defaultNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: source.LabelPolicy + "=" + policy})
	if err != nil {
		t.Fatal(err)
	}
	var cms []*v1.ConfigMap
	var names []string
	for i := range list.Items {
		cms = append(cms, &list.Items[i])
		names = append(names, list.Items[i].Name)
	}
	module, _, err := source.Assemble(policy, cms)
	if err != nil {
		t.Fatal(err)
	}
	return module, names
}

func TestPush(t *testing.T) {
	client, kubeconfig := pushEnv(t)
	ctx := context.Background()
	nodepin := testwasm.Path(t, "examples/nodepin")
	small, _ := os.ReadFile(nodepin)
	// A bigger module: nodepin with 1 MiB of random bytes in a custom
	// section (incompressible: three chunks).
	noise := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	big := withCustomSection(small, "noise", noise)
	bigPath := filepath.Join(t.TempDir(), "big.wasm")
	os.WriteFile(bigPath, big, 0o644)
	// Not ours: never deleted.
	foreign := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gpu-7", Namespace: defaultNamespace}, Data: map[string]string{"a": "b"}}
	if _, err := client.CoreV1().ConfigMaps(defaultNamespace).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pushCLI := func(path string) string {
		t.Helper()
		code, out, errs := runCLI("push", "--configmaps", path, "--name", "gpu", "--kubeconfig", kubeconfig)
		if code != 0 {
			t.Fatalf("push %s: exit %d: %s", path, code, errs)
		}
		return out
	}
	want := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("output\n%s\nwant\n%s", got, want)
		}
	}

	out := pushCLI(bigPath)
	want(out, "configmap/gpu-0 created\nconfigmap/gpu-1 created\nconfigmap/gpu-2 created\n"+
		fmt.Sprintf("policy gpu: sha256 %s, %d bytes in 3 ConfigMap(s) in namespace wasmsched-system\n", source.Digest(big), len(big)))
	if m, names := installed(t, client, "gpu"); !bytes.Equal(m, big) || len(names) != 3 {
		t.Fatalf("after the first push: %v", names)
	}

	// A smaller module: updated in place, the leftover chunk deleted.
	out = pushCLI(nodepin)
	want(out, "configmap/gpu-0 configured\nconfigmap/gpu-1 configured\nconfigmap/gpu-2 deleted\n"+
		fmt.Sprintf("policy gpu: sha256 %s, %d bytes in 2 ConfigMap(s) in namespace wasmsched-system\n", source.Digest(small), len(small)))
	if m, names := installed(t, client, "gpu"); !bytes.Equal(m, small) || strings.Join(names, ",") != "gpu-0,gpu-1" {
		t.Fatalf("after the second push: %v", names)
	}
	if _, err := client.CoreV1().ConfigMaps(defaultNamespace).Get(ctx, "gpu-7", metav1.GetOptions{}); err != nil {
		t.Fatalf("a ConfigMap that is not a chunk was touched: %v", err)
	}

	// Again: nothing to do.
	out = pushCLI(nodepin)
	if !strings.HasPrefix(out, "configmap/gpu-0 unchanged\nconfigmap/gpu-1 unchanged\npolicy gpu: ") {
		t.Fatalf("third push:\n%s", out)
	}

	// A ConfigMap of the same name that is not ours is not overwritten.
	if _, err := client.CoreV1().ConfigMaps(defaultNamespace).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: defaultNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI("push", "--configmaps", nodepin, "--name", "web", "--kubeconfig", kubeconfig)
	if wantErr := "wasmsched push: configmap wasmsched-system/web-0 exists and is not a chunk of policy web (no label wasmsched.io/policy=web); not overwriting it\n"; code != 1 || errs != wantErr {
		t.Fatalf("exit %d, stderr %q, want %q", code, errs, wantErr)
	}

	// Without the SchedulingPolicy CRD: push says so before writing, and
	// status reports from the status ConfigMap.
	code, _, errs = runCLI("push", nodepin, "--name", "crd", "--kubeconfig", kubeconfig)
	if code != 1 || !strings.Contains(errs, "is the SchedulingPolicy CRD schedulingpolicies.wasmsched.io installed?") {
		t.Fatalf("push without the CRD: exit %d, stderr %q", code, errs)
	}
	list, err := client.CoreV1().ConfigMaps(defaultNamespace).List(ctx, metav1.ListOptions{LabelSelector: source.LabelModule})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) > 0 {
		t.Fatalf("push without the CRD wrote %d chunks", len(list.Items))
	}
	code, _, errs = runCLI("status", "--kubeconfig", kubeconfig)
	if code != 1 || !strings.Contains(errs, "no SchedulingPolicy in wasmsched-system, and read wasmsched-system/wasmsched-status") {
		t.Fatalf("status without the CRD: exit %d, stderr %q", code, errs)
	}
}

// withCustomSection appends a custom section (ignored by the runtime) to a
// module.
func withCustomSection(module []byte, name string, payload []byte) []byte {
	body := binary.AppendUvarint(nil, uint64(len(name)))
	body = append(append(body, name...), payload...)
	out := append(slices.Clone(module), 0)
	out = binary.AppendUvarint(out, uint64(len(body)))
	return append(out, body...)
}

// The pack output is accepted by server-side apply (what kubectl apply
// --server-side sends), and too big for client-side apply's annotation.
func TestPackApply(t *testing.T) {
	client, _ := pushEnv(t)
	ctx := context.Background()
	wasm := testwasm.Path(t, "examples/nodepin")
	module, _ := os.ReadFile(wasm)
	code, out, errs := runCLI("pack", wasm, "--name", "gpu")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	api := client.CoreV1().ConfigMaps(defaultNamespace)
	force := true
	for _, cm := range decodeStream(t, out) {
		b, err := json.Marshal(cm)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.Patch(ctx, cm.Name, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "kubectl", Force: &force}); err != nil {
			t.Fatalf("server-side apply of %s: %v", cm.Name, err)
		}
	}
	if m, _ := installed(t, client, "gpu"); !bytes.Equal(m, module) {
		t.Fatal("applied ConfigMaps do not assemble to the module")
	}

	// Client-side apply stores the whole object in an annotation, limited
	// to 256 KiB: the first chunk does not fit.
	cm := decodeStream(t, out)[0]
	cm.Name = "client-side"
	last, _ := json.Marshal(cm)
	cm.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = string(last)
	_, err := api.Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.annotations: Too long") {
		t.Fatalf("client-side apply of a chunk: %v, want an annotation too long error", err)
	}
}
