package engine

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// defaultMemoryBudget is the memory the worker pool may grow into when
// Config.MemoryBudget is 0: GOMEMLIMIT when it is set, else three
// quarters of the cgroup's memory limit (a container's), else 1 GiB.
func defaultMemoryBudget() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// cgroup v2 says "max" and v1 a huge number when there is no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<50 {
			return n / 4 * 3
		}
	}
	return 1 << 30
}
