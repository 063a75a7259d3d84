package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// The canary rollout end to end (issue 54): a model with spec.rollout Canary behind the test
// gateway's HTTPRoute (to the Services: the canary is refused on the pool route), a bounded load
// through the gateway on loopback, and a new version made by a change of the container's
// environment: a plain one, one answering 20% of its completions with engine failures
// (LOCALCLUSTER_VLLM_ERROR_RATE, the local vLLM's faults.go), one whose first token is 3x slower
// (LOCALCLUSTER_VLLM_TTFT_FACTOR), and a plain one with the operator restarted mid-step.

// isvcV1beta1 is the resource kubectl gets on the v1beta1 install: its columns are v1beta1's.
const isvcV1beta1 = "inferenceservices.v1beta1.ai.example.com"

// rolloutSteps are the two short steps every case rolls through.
const rolloutSteps = `[{"weight":25,"durationSeconds":30},{"weight":50,"durationSeconds":30}]`

// rolloutErrorBody is the fake vLLM's answer to a completion its fault knob fails: the
// dead-engine answer (test/localcluster/vllm/http.go).
const rolloutErrorBody = `"message":"EngineCore encountered an issue.`

// rolloutResult is one request of the load: when it was sent, its status (0: no answer), the
// endpoint the gateway sent it to, and the start of its body when it failed.
type rolloutResult struct {
	at       time.Time
	code     int
	endpoint string
	body     string
}

// rolloutLoad sends completions to url at a fixed pace from two workers until stopped.
type rolloutLoad = loadRecord[rolloutResult]

func startRolloutLoad(url string, perSecond int) *rolloutLoad {
	l := newLoadRecord[rolloutResult]()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "prompt": "a canary step judged by its own numbers", "max_tokens": 2})
	for w := 0; w < 2; w++ {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			tick := time.NewTicker(2 * time.Second / time.Duration(perSecond)) // the load's pace
			defer tick.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				r := rolloutResult{at: time.Now()}
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					r.body = err.Error()
				} else {
					msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					resp.Body.Close()
					r.code, r.endpoint = resp.StatusCode, resp.Header.Get("x-gateway-destination-endpoint")
					if r.code != http.StatusOK {
						r.body = string(bytes.TrimSpace(msg))
					}
				}
				l.add(r)
			}
		}()
	}
	return l
}

// rolloutTally sorts the load's results: answered by a stable pod, by another (the canary's),
// failed by the canary's own fault (its engine-failure answer), and every other failure.
type rolloutTally struct {
	ok, byStable, byCanary, canaryFaults int
	other                                []string
}

func tallyRollout(results []rolloutResult, stableIPs map[string]bool) rolloutTally {
	var t rolloutTally
	for _, r := range results {
		ip, _, _ := strings.Cut(r.endpoint, ":")
		stable := stableIPs[ip]
		switch {
		case r.endpoint != "" && stable:
			t.byStable++
		case r.endpoint != "":
			t.byCanary++
		}
		switch {
		case r.code == http.StatusOK:
			t.ok++
		case r.code == http.StatusInternalServerError && !stable && r.endpoint != "" && strings.Contains(r.body, rolloutErrorBody):
			t.canaryFaults++
		default:
			t.other = append(t.other, fmt.Sprintf("%s %d from %q: %s", r.at.Format("15:04:05.000"), r.code, r.endpoint, r.body))
		}
	}
	return t
}

// rolloutView is what a poll of the model saw: status.rollout, the route's backends and
// weights, and the Rollout condition.
type rolloutView struct {
	rollout   *crd.RolloutStatus
	backends  string
	condition *metav1.Condition
}

func viewRollout(t *testing.T, ns, name string) (rolloutView, error) {
	t.Helper()
	var v rolloutView
	b, err := getV1beta1(t, ns, name)
	if err != nil {
		return v, err
	}
	v.rollout = b.Status.Rollout
	v.condition = meta.FindStatusCondition(b.Status.Conditions, crd.ConditionRollout)
	u, err := env.Dyn.Resource(reconcile.HTTPRouteGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return v, err
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	if len(rules) > 0 {
		refs, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "backendRefs")
		var parts []string
		for _, r := range refs {
			m := r.(map[string]any)
			parts = append(parts, fmt.Sprintf("%v=%v", m["name"], m["weight"]))
		}
		v.backends = strings.Join(parts, ",")
	}
	return v, nil
}

// rolloutEvents are the model's Events of the rollout's reasons, oldest first, as
// "Type Reason: message".
func rolloutEvents(t *testing.T, ns, name string) []string {
	t.Helper()
	l, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].CreationTimestamp.Before(&l.Items[j].CreationTimestamp) })
	var out []string
	for _, e := range l.Items {
		switch e.Reason {
		case "Progressing", "StepPassed", "Promoted", "RolledBack":
			out = append(out, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	return out
}

// stableTemplateEnv is the stable Deployment's model-server container's value of name.
func stableTemplateEnv(t *testing.T, ns, isvc, name string) string {
	t.Helper()
	d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), isvc, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// rolloutCase is one version rolled out: the environment that makes it, and how it ends.
type rolloutCase struct {
	name    string
	env     string // the new version's spec.env, JSON
	restart bool   // the operator restarted once the first step runs
	want    string // crd.RolloutPromoted or crd.RolloutRolledBack
	failed  string // a rollback's message names this number
}

// TestCanaryRollout: a good version promoted through every step; a version answering 20%
// errors and one whose first token is 3x slower each rolled back within the first step, the
// stable serving throughout (every failed request is one of the canary's own faults), with
// status.rollout and the Warning Event naming the number that failed; the operator restarted
// mid-rollout resumes it at its step, the same canary. kubectl get isvc shows the step and
// kubectl isvc why the verdict. The cases run side by side, each in its own namespace.
func TestCanaryRollout(t *testing.T) {
	eppBin, gwBin := poolBins(t)
	// The gateway's CRDs (the test gateway watches InferencePools too), served before the
	// operator starts, which discovers them then; removed last, after the suite's CRD and
	// operator are back.
	crds := filepath.Join(operator.EPPManifests(eppBin), "crd")
	env.Kubectl(t, "apply", "-f", crds)
	env.Kubectl(t, "wait", "--for=condition=Established", "-f", crds, "--timeout=60s")
	t.Cleanup(func() {
		stopOperator(t)
		env.Kubectl(t, "delete", "-f", crds, "--wait=true", "--timeout=60s")
		restartOperator(t)
	})
	// status.rollout is v1beta1's: the v1beta1 install, its operator with the gateway's parent
	// and routes to the Services (--inference-pool=off: on the pool route a canary is refused).
	w := useWebhookCRD(t)
	startRolloutOperator(t, w)
	gwAddr, _, stopGW, err := operator.StartGateway(testenv.Ctx(t, time.Minute), gwBin, filepath.Join(env.Dir, "gateway-rollout.log"),
		"--kubeconfig="+env.Cluster.KubeconfigPath(), "--gateway="+gatewayParent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopGW() })
	pluginDir := buildPlugin(t)

	var restartMu sync.Mutex // the one case that restarts the shared operator
	for _, c := range []rolloutCase{
		{name: "good", env: `[{"name":"MODEL_VERSION","value":"v2"}]`, want: crd.RolloutPromoted},
		{name: "errors", env: `[{"name":"MODEL_VERSION","value":"v2"},{"name":"LOCALCLUSTER_VLLM_ERROR_RATE","value":"0.2"}]`,
			want: crd.RolloutRolledBack, failed: "error rate"},
		{name: "slow", env: `[{"name":"MODEL_VERSION","value":"v2"},{"name":"LOCALCLUSTER_VLLM_TTFT_FACTOR","value":"3"}]`,
			want: crd.RolloutRolledBack, failed: "time to first token"},
		{name: "restart", env: `[{"name":"MODEL_VERSION","value":"v2"}]`, restart: true, want: crd.RolloutPromoted},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testCanaryRollout(t, c, w, gwAddr, pluginDir, &restartMu)
		})
	}
}

// startRolloutOperator (re)starts the shared operator as the v1beta1 install runs it (w.start),
// with routes to the models' Services, and extra flags.
func startRolloutOperator(t *testing.T, w *webhookInstall, extra ...string) {
	t.Helper()
	stopOperator(t)
	if err := startOperator(testenv.Ctx(t, 2*time.Minute), append([]string{fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", w.port),
		"--webhook-cert-dir=" + w.certDir, "--webhook-ca-sync-period=1s", "--storage-migration-period=1s",
		"--gateway-parent=" + gatewayParent, "--inference-pool=off"}, extra...)...); err != nil {
		t.Fatal(err)
	}
}

func testCanaryRollout(t *testing.T, c rolloutCase, w *webhookInstall, gwAddr, pluginDir string, restartMu *sync.Mutex) {
	ns := env.Namespace(t)
	ctx := context.Background()
	// Before the suite's CRD comes back (cleanups run last first): through the finalizer.
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	kubectl := func(args ...string) string { return env.Kubectl(t, append([]string{w.cache}, args...)...) }
	const name = "m"
	applyYAML(t, ns, `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: `+name+`}
spec:
  baseModel: Qwen/Qwen3-0.6B
  replicas: 1
  gpusPerReplica: 1
  gateway: {}
  env: [{name: MODEL_VERSION, value: v1}]
  rollout: {strategy: Canary, steps: `+rolloutSteps+`}
`)
	testenv.Eventually(t, 3*time.Minute, "Ready and routed", func() error {
		b, err := getV1beta1(t, ns, name)
		if err != nil {
			return err
		}
		r := meta.FindStatusCondition(b.Status.Conditions, crd.ConditionRouted)
		if b.Status.Phase != crd.PhaseReady || r == nil || r.Status != metav1.ConditionTrue {
			return fmt.Errorf("phase %s, Routed %+v", b.Status.Phase, r)
		}
		if b.Status.Rollout != nil {
			return fmt.Errorf("a first version is no rollout: status.rollout %+v", *b.Status.Rollout)
		}
		return nil
	})
	stableIPs := map[string]bool{}
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		stableIPs[p.Status.PodIP] = true
	}

	load := startRolloutLoad("http://"+gwAddr+"/"+ns+"/"+name+"/v1/completions", 8)
	defer load.end()
	testenv.Eventually(t, time.Minute, "the stable answering through the gateway", func() error {
		if tl := tallyRollout(load.snapshot(), stableIPs); tl.ok < 10 {
			return fmt.Errorf("%d answered, other failures %v", tl.ok, tl.other)
		}
		return nil
	})

	// The new version: the container's environment, part of the pod template.
	patch := []byte(`{"spec":{"env":` + c.env + `}}`)
	if _, err := env.Dyn.Resource(crd.ResourceV1beta1).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()

	var (
		seen        []string // each distinct (phase, step, weight, backends) in order
		last        rolloutView
		getDuring   string // kubectl get isvc while a step runs
		restarted   bool
		resumedSame bool // the canary Deployment seen again after the restart
		canaryUID   types.UID
		revBefore   string
		stepAtStop  int32
		rolledBack  time.Time
		stepStarted time.Time
	)
	testenv.Eventually(t, 4*time.Minute, "the rollout to end "+c.want, func() error {
		v, err := viewRollout(t, ns, name)
		if err != nil {
			return err
		}
		last = v
		r := v.rollout
		if r == nil {
			return fmt.Errorf("no status.rollout yet")
		}
		key := fmt.Sprintf("%s step %d/%d weight %d route %s", r.Phase, r.Step, r.Steps, r.Weight, v.backends)
		if len(seen) == 0 || seen[len(seen)-1] != key {
			seen = append(seen, key)
			t.Logf("%5.1fs %s: %s", time.Since(changed).Seconds(), key, r.Message)
		}
		if r.Phase == crd.RolloutProgressing && r.StepStartedAt != "" && getDuring == "" {
			getDuring = kubectl("get", isvcV1beta1, name, "-n", ns, "-o", "wide")
			t.Logf("kubectl get isvc during step %d:\n%s", r.Step, getDuring)
		}
		if s, err := time.Parse(time.RFC3339, r.StepStartedAt); err == nil && r.Step == 1 {
			stepStarted = s
		}
		if restarted && !resumedSame && r.Phase == crd.RolloutProgressing {
			// the restarted operator carries the same canary on: its Deployment not recreated
			d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name+"-canary", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.UID != canaryUID {
				t.Errorf("the canary Deployment was recreated after the restart: %s, before %s", d.UID, canaryUID)
			}
			resumedSame = true
			t.Logf("after the restart: step %d, the same canary Deployment %s", r.Step, d.UID)
		}
		if c.restart && !restarted && r.Phase == crd.RolloutProgressing && r.Step == 1 && r.StepStartedAt != "" {
			d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name+"-canary", metav1.GetOptions{})
			if err != nil {
				return err
			}
			canaryUID, revBefore, stepAtStop = d.UID, r.CanaryRevision, r.Step
			restartMu.Lock()
			t.Logf("operator restarted at step %d (canary %s, Deployment %s)", r.Step, r.CanaryRevision, d.UID)
			startRolloutOperator(t, w)
			restartMu.Unlock()
			restarted = true
		}
		switch r.Phase {
		case crd.RolloutPromoted, crd.RolloutRolledBack:
			rolledBack = time.Now()
			return nil
		}
		return fmt.Errorf("%s", key)
	})
	r := last.rollout
	t.Logf("ended %s after %.1fs: %s (route %s)", r.Phase, time.Since(changed).Seconds(), r.Message, last.backends)
	// the route back to the stable alone, and the canary gone
	testenv.Eventually(t, time.Minute, "the route to the stable alone, the canary's children gone", func() error {
		v, err := viewRollout(t, ns, name)
		if err != nil {
			return err
		}
		if v.backends != name+"=1" && v.backends != name+"=<nil>" && v.backends != name+"=100" {
			return fmt.Errorf("route %s", v.backends)
		}
		if d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, name+"-canary", metav1.GetOptions{}); !isNotFound(err) {
			st := "none"
			if r := v.rollout; r != nil {
				st = fmt.Sprintf("%s step %d, canary %s, failed %s: %s", r.Phase, r.Step, r.CanaryRevision, r.FailedRevision, r.Message)
			}
			created := "?"
			if d != nil {
				created = d.CreationTimestamp.Format(time.RFC3339)
			}
			return fmt.Errorf("canary Deployment there (created %s, error %v); status.rollout %s", created, err, st)
		}
		if _, err := env.Kube.CoreV1().Services(ns).Get(ctx, name+"-canary", metav1.GetOptions{}); !isNotFound(err) {
			return fmt.Errorf("canary Service: %v", err)
		}
		return nil
	})
	// a few more requests on the stable alone, then the load's account
	after := len(load.snapshot())
	testenv.Eventually(t, 30*time.Second, "requests after the rollout's end", func() error {
		if n := len(load.snapshot()) - after; n < 16 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	tl := tallyRollout(load.end(), stableIPs)
	t.Logf("load: %d answered (%d by the stable, %d by the canary), %d failed by the canary's own fault, %d other failures",
		tl.ok, tl.byStable, tl.byCanary, tl.canaryFaults, len(tl.other))
	if len(tl.other) > 0 {
		t.Errorf("requests failed that the canary's own fault does not explain (the rollout's doing): %d, first %s", len(tl.other), strings.Join(tl.other[:min(5, len(tl.other))], "\n"))
	}
	if tl.byCanary == 0 {
		t.Errorf("no request reached the canary: %+v", tl)
	}
	events := rolloutEvents(t, ns, name)
	t.Logf("events:\n%s", strings.Join(events, "\n"))
	hasEvent := func(prefix string) string {
		for _, e := range events {
			if strings.HasPrefix(e, prefix) {
				return e
			}
		}
		return ""
	}
	if hasEvent("Normal Progressing") == "" {
		t.Errorf("no Progressing Event")
	}

	switch c.want {
	case crd.RolloutPromoted:
		if r.Phase != crd.RolloutPromoted {
			t.Fatalf("phase %s: %s", r.Phase, r.Message)
		}
		if tl.canaryFaults > 0 {
			t.Errorf("a good version failed %d requests", tl.canaryFaults)
		}
		// through every step: each weight on the route, a StepPassed Event for each step but
		// the last, whose passing is the promotion
		for _, want := range []string{"step 1/2 weight 25 route " + name + "=75," + name + "-canary=25", "step 2/2 weight 50 route " + name + "=50," + name + "-canary=50"} {
			found := false
			for _, s := range seen {
				found = found || strings.Contains(s, want)
			}
			if !found {
				t.Errorf("never saw %q; saw %v", want, seen)
			}
		}
		if n := strings.Count(strings.Join(events, "\n"), "Normal StepPassed: step 1/2 passed"); n != 1 {
			t.Errorf("%d StepPassed Events for step 1, want 1", n)
		}
		if ev := hasEvent("Normal Promoted"); !strings.Contains(ev, "every step of 2 passed") {
			t.Errorf("Promoted Event %q", ev)
		}
		if v := stableTemplateEnv(t, ns, name, "MODEL_VERSION"); v != "v2" {
			t.Errorf("the stable's template after the promotion has MODEL_VERSION %q", v)
		}
		if c.restart {
			if !restarted {
				t.Fatal("the operator was never restarted")
			}
			if r.CanaryRevision != revBefore || stepAtStop != 1 {
				t.Errorf("after the restart canary %s, before %s at step %d", r.CanaryRevision, revBefore, stepAtStop)
			}
			// resumed, not started over: no second Progressing Event, no second canary
			if n := strings.Count(strings.Join(events, "\n"), "Normal Progressing"); n != 1 {
				t.Errorf("%d Progressing Events: the restarted operator started the rollout over", n)
			}
			if !resumedSame {
				t.Errorf("the canary was not seen running after the restart")
			}
		}
	case crd.RolloutRolledBack:
		if r.Phase != crd.RolloutRolledBack || r.Step != 1 {
			t.Fatalf("phase %s at step %d, want RolledBack at step 1: %s", r.Phase, r.Step, r.Message)
		}
		if !strings.Contains(r.Message, c.failed) || !regexp.MustCompile(`\d+(\.\d+)?(%|s)`).MatchString(r.Message) {
			t.Errorf("status.rollout.message %q does not name the %s's number", r.Message, c.failed)
		}
		if r.FailedRevision == "" || r.FailedRevision != r.CanaryRevision {
			t.Errorf("failedRevision %q, canaryRevision %q", r.FailedRevision, r.CanaryRevision)
		}
		ev := hasEvent("Warning RolledBack")
		if ev == "" || !strings.Contains(ev, c.failed) || !regexp.MustCompile(`\d+(\.\d+)?(%|s)`).MatchString(ev) {
			t.Errorf("Warning RolledBack Event %q does not name the %s's number", ev, c.failed)
		}
		if n := strings.Count(strings.Join(events, "\n"), "Warning RolledBack"); n != 1 {
			t.Errorf("%d Warning RolledBack Events, want one: the step was judged again after the rollback", n)
		}
		if strings.Contains(strings.Join(events, "\n"), "StepPassed") {
			t.Errorf("a step passed before the rollback: %v", events)
		}
		// within one step: judged at the first step's end (a bad version may be cut sooner)
		if !stepStarted.IsZero() && rolledBack.Sub(stepStarted) > 30*time.Second+20*time.Second {
			t.Errorf("rolled back %.0fs after the step began (30s steps)", rolledBack.Sub(stepStarted).Seconds())
		}
		if v := stableTemplateEnv(t, ns, name, "MODEL_VERSION"); v != "v1" {
			t.Errorf("the stable's template after the rollback has MODEL_VERSION %q, want v1", v)
		}
		if c.failed == "error rate" {
			// the canary's own share: every fifth of its completions, no more
			if tl.canaryFaults == 0 || tl.canaryFaults > (tl.byCanary+4)/5 {
				t.Errorf("%d canary faults of %d requests it answered, want its 20%%", tl.canaryFaults, tl.byCanary)
			}
		} else if tl.canaryFaults > 0 {
			t.Errorf("a slow version failed %d requests", tl.canaryFaults)
		}
		// the verdict in kubectl isvc why
		why := plugin(t, pluginDir, "why", name, "-n", ns)
		t.Logf("kubectl isvc why:\n%s", why)
		if !strings.Contains(why, "RolledBack") || !strings.Contains(why, c.failed) {
			t.Errorf("kubectl isvc why does not say the rollback and its number:\n%s", why)
		}
	}
	// the step in kubectl get isvc -o wide (its Rollout, Step and Canary columns) while one
	// runs, the verdict in kubectl get isvc after
	if getDuring == "" {
		t.Errorf("no step was seen running")
	} else if !regexp.MustCompile(`\bProgressing\s+[12]\s+(25|50)\s`).MatchString(getDuring) {
		t.Errorf("kubectl get isvc -o wide does not show the rollout's step and weight:\n%s", getDuring)
	}
	if got := kubectl("get", isvcV1beta1, name, "-n", ns); !strings.Contains(got, c.want) {
		t.Errorf("kubectl get isvc does not show the verdict %s:\n%s", c.want, got)
	} else {
		t.Logf("kubectl get isvc after:\n%s", got)
	}
}
