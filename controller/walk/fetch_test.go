package walk

import (
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// TestTail: the log's lines of the crashed run only, without timestamps, the last n, and the
// operator's decisive line.
func TestTail(t *testing.T) {
	run := reconcile.CrashedRun{StartedAt: t0.Add(-40 * time.Second), FinishedAt: t0.Add(-30 * time.Second)}
	stamp := func(d time.Duration) string { return t0.Add(-d).Format(time.RFC3339Nano) }
	log := strings.Join([]string{
		stamp(50*time.Second) + " a line of the run before",
		stamp(39*time.Second) + " Traceback (most recent call last):",
		stamp(39*time.Second) + `   File "x.py", line 1, in <module>`,
		stamp(39*time.Second) + " torch.OutOfMemoryError: CUDA out of memory",
		stamp(38*time.Second) + " \x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO: shutting down",
		stamp(5*time.Second) + " the next run's first line",
	}, "\n") + "\n"
	lines, decisive := Tail(log, run, 3)
	want := []string{`  File "x.py", line 1, in <module>`, "torch.OutOfMemoryError: CUDA out of memory", "(APIServer pid=1) INFO: shutting down"}
	if strings.Join(lines, "|") != strings.Join(want, "|") || decisive != "torch.OutOfMemoryError: CUDA out of memory" {
		t.Fatalf("lines %q decisive %q", lines, decisive)
	}
}
