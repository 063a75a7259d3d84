package memlimit

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // restore the test binary's own
	for name, tc := range map[string]struct {
		env  map[string]string
		want int64
	}{
		"container limit":  {map[string]string{MemoryLimitEnv: "268435456"}, 228170137},
		"GOMEMLIMIT wins":  {map[string]string{MemoryLimitEnv: "268435456", "GOMEMLIMIT": "100MiB"}, 0},
		"no limit":         {map[string]string{}, 0},
		"not a byte count": {map[string]string{MemoryLimitEnv: "256Mi"}, 0},
		"unlimited (max)":  {map[string]string{MemoryLimitEnv: "9223372036854775807"}, 0},
		"zero":             {map[string]string{MemoryLimitEnv: "0"}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			got := FromContainer(func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Fatalf("limit %d, want %d", got, tc.want)
			}
			if applied := debug.SetMemoryLimit(-1); (tc.want != 0 && applied != tc.want) || (tc.want == 0 && applied != math.MaxInt64) {
				t.Fatalf("runtime limit %d", applied)
			}
		})
	}
}
