package e2e

// Shards: make test runs this package as E2E_SHARD=i/n processes side by side, each with its
// own cluster and operator, so the suite's serial tests (which change what every test of one
// cluster sees) overlap across clusters instead of waiting on one. A file's tests stay
// together in one shard; files are dealt longest first to the shard with the least time.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// fileSeconds is each file's tests' time in one process: the serial tests' sum (a serial test
// with parallel subtests at its longest subtest) plus a quarter of the parallel ones'
// (E2E_PARALLEL run side by side), from make test's run of 2026-12-07 16:02 on 2 cores with two
// shards (test/README.md says how to refresh it); a file not listed weighs defaultFileSeconds.
// A wrong figure costs balance, never a test: every file lands in exactly one shard.
var fileSeconds = map[string]int{
	"lws_test.go":               213,
	"faults_test.go":            189,
	"gateway_timeouts_test.go":  169,
	"adapters_test.go":          144,
	"troubleshooting_test.go":   144,
	"core_test.go":              128,
	"autoscaling_scale_test.go": 120,
	"rollout_test.go":           114,
	"metricsadapter_test.go":    112,
	"autoscaling_kv_test.go":    111,
	"pool_test.go":              108,
	"hostile_routes_test.go":    106,
	"watchexpiry_test.go":       104,
	"adapters_engines_test.go":  98,
	"kueue_queuechange_test.go": 98,
	"hostile_deputy_test.go":    96,
	"rollout_prom_test.go":      85,
	"autoscaling_ttft_test.go":  84,
	"kueue_test.go":             78,
	"ownership_test.go":         77,
	"weights_cache_test.go":     76,
	"creating_test.go":          73,
	"keda_test.go":              72,
	"autoscaling_test.go":       71,
	"hostile_network_test.go":   71,
	"lastwords_test.go":         68,
	"scaletozero_test.go":       61,
	"diagnosis_test.go":         56,
	"plugin_test.go":            55,
	"hostile_activator_test.go": 54,
	"raise_test.go":             53,
	"weights_fill_test.go":      52,
	"conversion_test.go":        49,
	"v1beta1_test.go":           49,
	"gated_default_test.go":     46,
	"placement_test.go":         46,
	"engine_sglang_test.go":     37,
	"template_test.go":          37,
	"weights_s3_test.go":        35,
	"saturation_test.go":        34,
	"parallelism_test.go":       24,
	"start_phases_test.go":      23,
	"tampered_packed_test.go":   20, // measured alone
	"drain_test.go":             35, // measured alone
	"gateway_picker_test.go":    22,
	"upgrade_default_test.go":   21,
	"scaledown_test.go":         12,
	"prometheus_test.go":        9,
	"serving_test.go":           8,
	"serving_dashboard_test.go": 5,
	"badinput_test.go":          1,
	"kueue_workloads_test.go":   1,
	"metrics_secure_test.go":    1,
	"shard_unit_test.go":        1,
}

const defaultFileSeconds = 30

// parseShard reads "i/n" (0 <= i < n).
func parseShard(spec string) (i, n int, err error) {
	a, b, ok := strings.Cut(spec, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("E2E_SHARD=%q: want i/n with 0 <= i < n, like 0/2", spec)
	}
	return i, n, nil
}

// testsByFile lists the package's top-level tests (func TestX(t *testing.T)) per file of dir.
func testsByFile(dir string) (map[string][]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			out[filepath.Base(p)] = append(out[filepath.Base(p)], fn.Name.Name)
		}
	}
	return out, nil
}

// shards deals files to n shards, the longest first to the shard with the least time so far
// (ties to the lower shard, files by name), and returns each shard's tests, sorted.
func shards(byFile map[string][]string, seconds map[string]int, n int) [][]string {
	files := make([]string, 0, len(byFile))
	for f, tests := range byFile {
		if len(tests) > 0 {
			files = append(files, f)
		}
	}
	weight := func(f string) int {
		if s, ok := seconds[f]; ok {
			return s
		}
		return defaultFileSeconds
	}
	sort.Slice(files, func(a, b int) bool {
		if weight(files[a]) != weight(files[b]) {
			return weight(files[a]) > weight(files[b])
		}
		return files[a] < files[b]
	})
	load := make([]int, n)
	out := make([][]string, n)
	for _, f := range files {
		least := 0
		for s := 1; s < n; s++ {
			if load[s] < load[least] {
				least = s
			}
		}
		load[least] += weight(f)
		out[least] = append(out[least], byFile[f]...)
	}
	for _, tests := range out {
		sort.Strings(tests)
	}
	return out
}

// shardPattern is the -run pattern of shard spec ("i/n") of the tests in dir; a shard with no
// test gets a pattern that matches none.
func shardPattern(spec, dir string) (string, error) {
	i, n, err := parseShard(spec)
	if err != nil {
		return "", err
	}
	byFile, err := testsByFile(dir)
	if err != nil {
		return "", err
	}
	tests := shards(byFile, fileSeconds, n)[i]
	if len(tests) == 0 {
		return "^$", nil
	}
	quoted := make([]string, len(tests))
	for k, t := range tests {
		quoted[k] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(quoted, "|") + ")$", nil
}

// applyShard narrows -test.run to this process's shard when E2E_SHARD is set and no -run was
// given; it says which tests it runs on stderr.
func applyShard(run func() string, set func(string) error) error {
	spec := os.Getenv("E2E_SHARD")
	if spec == "" {
		return nil
	}
	if r := run(); r != "" {
		fmt.Fprintf(os.Stderr, "e2e: E2E_SHARD=%s ignored: -run %q chooses the tests\n", spec, r)
		return nil
	}
	pattern, err := shardPattern(spec, ".")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: shard %s runs %s\n", spec, pattern)
	return set(pattern)
}
