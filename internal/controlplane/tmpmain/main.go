// Temporary: checks that Start works without a testing.T. Deleted after use.
package main

import (
	"context"
	"log"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmsched/wasmsched/internal/controlplane"
)

func main() {
	ctx := context.Background()
	t0 := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: log.Printf})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("up in %v", time.Since(t0))
	if err := cp.WriteKubeconfig(os.Args[1]); err != nil {
		log.Fatal(err)
	}
	ns, err := cp.Client().CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("namespaces: %d", len(ns.Items))
	if len(os.Args) > 2 {
		time.Sleep(20 * time.Second)
	}
	cp.Stop()
	log.Printf("stopped")
}
