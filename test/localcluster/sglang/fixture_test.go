package sglang

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// fixtureDir is where the operator's SGLang engine package keeps the fake's logs for its log
// readers (controller/engine/sglang/fake_test.go): the fake's module cannot import the
// operator's, so the readers are tested on the fake's real output there.
const fixtureDir = "../../../controller/engine/sglang/testdata/fake"

// fixtures are the runs whose logs the readers get: each as the operator reads a container's
// log (the kubelet's RFC 3339 stamps on every line).
var fixtures = []struct {
	file string
	spec proc.Spec
	cfg  Config
	// serve: the run serves (its log is complete once it is ready); else it exits.
	serve bool
}{
	{"start.log", proc.Spec{Args: launch("Qwen/Qwen3-8B")}, Config{TimeScale: 0.05}, true},
	{"start-no-cuda-graph.log", proc.Spec{Args: launch("Qwen/Qwen3-8B", "--disable-cuda-graph")}, Config{TimeScale: 0.05}, true},
	{"crash-cuda-oom.log", proc.Spec{Args: launch("Qwen/Qwen3-235B-A22B", "--tp-size", "2"), GPUs: 2}, Config{DownloadTime: time.Millisecond}, false},
	{"crash-not-enough-memory.log", proc.Spec{Args: launch("Qwen/Qwen3-32B", "--mem-fraction-static", "0.75")}, Config{}, false},
	{"crash-bad-argument.log", proc.Spec{Args: launch("Qwen/Qwen3-8B", "--tp", "2", "--max-model-len", "4096")}, Config{}, false},
	{"crash-server-args.log", proc.Spec{Args: launch("Qwen/Qwen3-8B", "--enable-lora", "--max-loras-per-batch", "8", "--max-loaded-loras", "4")}, Config{}, false},
	{"crash-gpu-ecc.log", proc.Spec{Args: launch("Qwen/Qwen3-8B"), GPUFault: proc.FaultECC}, Config{}, false},
	{"crash-group-timeout.log", proc.Spec{Command: []string{"/bin/sh", "-c"}, Args: []string{groupScript("0", "1")}}, Config{}, false},
}

// variable are the parts of a log that differ from run to run: numbers (stamps, times,
// rates).
var variable = regexp.MustCompile(`[0-9]+`)

// TestSGLangOperatorFixtures: the fixtures the operator's readers are tested on are this fake's
// output. With SGLANG_FIXTURES=write the runs are written there; otherwise each run's log must
// match its fixture but for its numbers, so a change of the fake's lines fails here until the
// fixtures (and the readers' tests on them) follow.
func TestSGLangOperatorFixtures(t *testing.T) {
	write := os.Getenv("SGLANG_FIXTURES") == "write"
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			s, log, _ := stStart(t, fx.spec, fx.cfg)
			if fx.serve { // no probe: its access lines would differ from run to run
				waitLog(t, log, "The server is fired up and ready to roll!")
			} else {
				stExit(t, s, log)
			}
			got := log.Render(proc.LogOptions{TailLines: -1, Timestamps: true})
			path := filepath.Join(fixtureDir, fx.file)
			if write {
				if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (SGLANG_FIXTURES=write makes it)", err)
			}
			g, w := strings.Split(variable.ReplaceAllString(got, "N"), "\n"), strings.Split(variable.ReplaceAllString(string(want), "N"), "\n")
			for i := 0; i < max(len(g), len(w)); i++ {
				gl, wl := "", ""
				if i < len(g) {
					gl = g[i]
				}
				if i < len(w) {
					wl = w[i]
				}
				if gl != wl {
					t.Fatalf("%s line %d:\n got %q\nwant %q\n(SGLANG_FIXTURES=write rewrites the fixtures)", fx.file, i+1, gl, wl)
				}
			}
		})
	}
}
