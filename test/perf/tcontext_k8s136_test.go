//go:build k8s1.35 || k8s1.36

package perf

import "k8s.io/kubernetes/test/utils/ktesting"

// tContext is what scheduler_perf's hooks receive (1.35 and 1.36).
type tContext = ktesting.TContext
