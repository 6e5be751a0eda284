//go:build !k8s1.35 && !k8s1.36

package perf

import "k8s.io/kubernetes/test/utils/client-go/ktesting"

// tContext is what scheduler_perf's hooks receive: from 1.37 the context
// with a client lives in test/utils/client-go/ktesting.
type tContext = ktesting.TContext
