// Package memlimit sets the Go heap's soft limit from the container's memory limit, before
// anything else runs.
package memlimit

import (
	"math"
	"runtime/debug"
	"strconv"
)

// MemoryLimitEnv carries the container's memory limit in bytes (the Deployment sets it from
// the downward API, resourceFieldRef limits.memory).
const MemoryLimitEnv = "MEMORY_LIMIT"

// memoryLimitShare of the container's limit is the Go heap's soft limit: GOGC's headroom
// over the live heap is taken back by collecting harder near the limit, not by the OOM
// killer; the rest is for stacks, the runtime and the binary's pages.
const memoryLimitShare = 0.85

// FromContainer sets the runtime's soft memory limit from the container's, unless
// GOMEMLIMIT is set (the runtime has read it then). It returns the limit set, or 0.
func FromContainer(getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit, err := strconv.ParseInt(getenv(MemoryLimitEnv), 10, 64)
	if err != nil || limit <= 0 || limit == math.MaxInt64 {
		return 0
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	return soft
}
