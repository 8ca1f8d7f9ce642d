//go:build !unix

package engine

import "time"

// processCPU is unknown here: the worker pool grows on demand and memory
// alone, and the subscriptions' latency signal is its only CPU brake.
func processCPU() time.Duration { return 0 }
