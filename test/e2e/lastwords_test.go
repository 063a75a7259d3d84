package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestLastWords: for every engine, a crash-looping model's status message and its Warning Event
// carry the line of the crashed run's log that says why it died, as `kubectl logs --previous`
// shows it: read by the operator through pods/log on the local cluster, whose fake engines fail
// as the real ones do, in their own words. Then
// the reads are counted per crash-looping pod over a minute: one or two per crashed run, none per resync.
func TestLastWords(t *testing.T) {
	ns := env.Namespace(t)
	type crash struct{ name, spec, reason, line string }
	var cases []crash
	for _, e := range engines {
		suffix := ""
		if e.name != engine.VLLM {
			suffix = "-" + e.name
		}
		cases = append(cases,
			// An engine argument the engine does not know: argparse's error, exit 2.
			crash{"bad-arg" + suffix, e.meta("bad-arg"+suffix, `"engineArgs":["--foo"]`) + "\nspec: {model: m, replicas: 1, gpusPerReplica: 1}",
				"CrashLoopBackOff", e.unknownArg},
			// 72B parameters on one 80 GiB GPU: torch's out-of-memory, the root cause the
			// engine's last line points above to (SGLang's launcher then exits 0).
			crash{"cuda-oom" + suffix, e.meta("cuda-oom"+suffix, "") + "\nspec: {model: Qwen/Qwen2.5-72B-Instruct, replicas: 1, gpusPerReplica: 1}",
				"CrashLoopBackOff", "torch.OutOfMemoryError: CUDA out of memory."})
	}
	cases = append(cases,
		// The image conventions: killed by the kernel mid-load, and an engine dying while it serves.
		crash{"oomkilled", "metadata: {name: oomkilled}\nspec: {model: m, replicas: 1, gpusPerReplica: 1, image: kubelet.fake/oomkilled:v1}",
			"OOMKilled", "Loading safetensors checkpoint shards:"},
		crash{"engine-dies", "metadata: {name: engine-dies}\nspec: {model: m, replicas: 1, gpusPerReplica: 1, image: kubelet.fake/crashloop:v1}",
			"CrashLoopBackOff", "RuntimeError: CUDA error: an illegal memory access was encountered"})
	for _, c := range cases {
		applyYAML(t, ns, "apiVersion: ai.example.com/v1alpha1\nkind: InferenceService\n"+c.spec+"\n")
	}
	start := time.Now()
	for _, c := range cases {
		testenv.Eventually(t, 90*time.Second, c.name+"'s message quoting its log", func() error {
			i, err := env.ISVC(ns, c.name)
			if err != nil {
				return err
			}
			if msg := readyMessage(i); i.Status.Reason != c.reason || !strings.Contains(msg, "; log: "+c.line) {
				return fmt.Errorf("reason %q message %q", i.Status.Reason, msg)
			}
			return nil
		})
		msg := env.Kubectl(t, "get", "isvc", "-n", ns, c.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		if !strings.Contains(msg, c.line) {
			t.Fatalf("%s: kubectl get -o jsonpath: %q", c.name, msg)
		}
		t.Logf("%s (%.0fs after apply)\n  kubectl get isvc: %s\n  message: %s", c.name, time.Since(start).Seconds(), getRow(t, ns, c.name), msg)

		// The Warning went out with the status that first had the reason: it quotes the line.
		evs, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == crd.Kind && e.Regarding.Name == c.name && e.Type == corev1.EventTypeWarning && e.Reason == c.reason {
				notes = append(notes, e.Note)
			}
		}
		if len(notes) != 1 || !strings.Contains(notes[0], c.line) {
			t.Fatalf("%s: %d %s Warning Events, notes %q; want one quoting %q", c.name, len(notes), c.reason, notes, c.line)
		}
		t.Logf("  Warning %s: %s", c.reason, notes[0])
	}

	// Log reads per crash-looping pod: one per crashed run (two when a run seen just exited
	// was already restarted), none per resync.
	restarts := func() int32 { return env.Restarts(t, ns) }
	reads := func() float64 {
		fams, err := env.op.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		return operator.SumCounter(fams, "inferenceservice_operator_pod_log_reads_total", nil)
	}
	// A minute is 30 resyncs (--resync=2s) and, at this back-off, a few restarts a pod.
	const window = time.Minute
	r0, n0, syncs0 := reads(), restarts(), reconciles(t)
	deadline := time.Now().Add(window)
	testenv.Eventually(t, window+30*time.Second, "the measurement window", func() error {
		if time.Now().Before(deadline) {
			return fmt.Errorf("%s left", time.Until(deadline).Round(time.Second))
		}
		return nil
	})
	r1, n1, syncs1 := reads(), restarts(), reconciles(t)
	pods := float64(len(cases))
	t.Logf("over %s, %d crash-looping pods: %.0f restarts, %.0f reconciles, %.0f log reads: %.2f reads per restart, %.1f reads per pod per hour at this back-off (the kubelet's cap of 5 min allows at most 12 restarts, so 12-24 reads, per pod per hour)",
		window, len(cases), float64(n1-n0), syncs1-syncs0, r1-r0, (r1-r0)/max(1, float64(n1-n0)), (r1-r0)/pods*float64(time.Hour/window))
	// One read per crashed run, two when a run seen just exited was already restarted: a read
	// per resync would be 30 a pod here.
	if reads, runs := r1-r0, float64(n1-n0); reads > 2*runs+pods {
		t.Fatalf("%.0f log reads for %.0f restarts of %d pods: the logs are read again without a new run", reads, runs, len(cases))
	}
	fams, err := env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	for _, result := range []string{"ok", "forbidden", "error"} {
		t.Logf("  inferenceservice_operator_pod_log_reads_total{result=%q} %.0f", result,
			operator.SumCounter(fams, "inferenceservice_operator_pod_log_reads_total", func(l map[string]string) bool { return l["result"] == result }))
	}
}

func reconciles(t *testing.T) float64 {
	fams, err := env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	return operator.SumCounter(fams, "controller_runtime_reconcile_total", nil)
}
