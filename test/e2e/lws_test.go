package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// startLWS runs LeaderWorkerSet (LWS_BIN, built by make lws) against the suite's cluster until
// the test ends. Without LWS_BIN the test is skipped on a developer's machine and fails in CI,
// where make test always builds it.
func startLWS(t *testing.T) *operator.LWS {
	t.Helper()
	return operator.RunForTest(testenv.Ctx(t, 3*time.Minute), t, env.Cluster, operator.LWSBinEnv, "lws", filepath.Join(env.Dir, "lws"), operator.StartLWS)
}

// groupPods lists the model's LeaderWorkerSet pods, by name.
func groupPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	l, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kinds.LWSNameLabel + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func isvcSays(t *testing.T, ns, name string) (*crd.InferenceService, string) {
	t.Helper()
	i, err := env.ISVC(ns, name)
	if err != nil {
		return nil, err.Error()
	}
	msg := ""
	for _, c := range i.Status.Conditions {
		if c.Type == crd.ConditionReady {
			msg = c.Message
		}
	}
	return i, fmt.Sprintf("%s %s %d/%d: %s", i.Status.Phase, i.Status.Reason, i.Status.ReadyReplicas, i.Spec.Replicas, msg)
}

// TestMultiNodeOnLeaderWorkerSet: a model of 16 GPUs per replica on 8-GPU nodes runs as
// LeaderWorkerSet groups of 2 pods: Ready on 4 distinct nodes, served by the leaders only; a
// killed worker takes its group down (the isvc says so) and LWS brings it back; a third group
// that no node pair can hold is a clear reason; a model of 2 x 4 GPUs per replica scales 2 -> 3
// through the isvc. The CRD refuses inconsistent parallelism with the numbers in the message.
func TestMultiNodeOnLeaderWorkerSet(t *testing.T) {
	startLWS(t)
	w := useWebhookCRD(t) // restarts the operator, which now discovers LeaderWorkerSet
	ns := env.Namespace(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	kubectl := func(args ...string) string { return env.Kubectl(t, append([]string{w.cache}, args...)...) }
	apply := func(name, spec string) {
		f := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(f, []byte("apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: "+name+"}\nspec:\n"+spec), 0o600); err != nil {
			t.Fatal(err)
		}
		kubectl("apply", "-n", ns, "-f", f)
	}

	// Refused at the API server, each with what to change.
	for _, bad := range []struct{ spec, want string }{
		{"  baseModel: m\n  replicas: 1\n  gpusPerReplica: 16\n  multiNode: {nodes: 3}\n", crd.RuleMultiNodeGPUsMsg},
		{"  baseModel: m\n  replicas: 1\n  gpusPerReplica: 16\n  multiNode: {nodes: 2, tensorParallelSize: 4}\n", crd.RuleMultiNodeParallelMsg},
		{"  baseModel: m\n  replicas: 1\n  gpusPerReplica: 32\n", crd.RuleOneNodeGPUsMsg},
		{"  baseModel: m\n  replicas: 1\n  gpusPerReplica: 34\n  multiNode: {nodes: 2}\n", crd.RuleMultiNodePerNodeMsg},
		{"  baseModel: m\n  replicas: 1\n  gpusPerReplica: 16\n  multiNode: {nodes: 2}\n  engineArgs: [--pipeline-parallel-size, \"4\"]\n", "--pipeline-parallel-size is spec.multiNode.pipelineParallelSize"},
	} {
		f := filepath.Join(t.TempDir(), "bad.yaml")
		os.WriteFile(f, []byte("apiVersion: ai.example.com/v1beta1\nkind: InferenceService\nmetadata: {name: bad}\nspec:\n"+bad.spec), 0o600)
		out, err := kubectlErr(t, nil, w.cache, "apply", "--dry-run=server", "-n", ns, "-f", f)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Fatalf("%s: want a refusal with %q, got %v: %s", bad.spec, bad.want, err, out)
		}
	}

	// Every engine but the default forms a group of its own first, through its own launch
	// (SGLang's --nnodes/--node-rank/--dist-init-addr over the cluster DNS, no Ray), and its
	// leader serves; the default engine's groups are the rest of the test.
	for _, e := range engines[1:] {
		name := "group-" + e.name
		apply(name, "  baseModel: deepseek-ai/DeepSeek-V3\n  engine: "+e.name+"\n  replicas: 1\n  gpusPerReplica: 16\n  multiNode: {nodes: 2}\n")
		testenv.Eventually(t, 3*time.Minute, name+" Ready with 1 group", func() error {
			i, says := isvcSays(t, ns, name)
			if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 1 {
				return fmt.Errorf("%s", says)
			}
			return nil
		})
		pods := groupPods(t, ns, name)
		if len(pods) != 2 || pods[0].Spec.NodeName == pods[1].Spec.NodeName {
			t.Fatalf("%s: %d pods, want 2 on two nodes", name, len(pods))
		}
		for _, p := range pods {
			if p.Labels[kinds.LWSWorkerLabel] == "0" {
				leaderServes(t, p, "deepseek-ai/DeepSeek-V3")
			}
		}
		t.Logf("%s: a group of 2 pods on 2 nodes, its leader serves", name)
		kubectl("delete", "isvc", name, "-n", ns, "--wait=true", "--timeout=60s")
	}

	created := time.Now()
	apply("big", "  baseModel: deepseek-ai/DeepSeek-V3\n  replicas: 2\n  gpusPerReplica: 16\n  multiNode: {nodes: 2}\n")
	testenv.Eventually(t, 3*time.Minute, "big Ready with 2 groups", func() error {
		i, says := isvcSays(t, ns, "big")
		if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 2 {
			return fmt.Errorf("%s", says)
		}
		return nil
	})
	t.Logf("created to Ready (2 groups of 2 pods): %.1fs", time.Since(created).Seconds())
	t.Logf("kubectl get isvc,lws,pods:\n%s\n%s", kubectl("get", "isvc,leaderworkersets", "-n", ns),
		kubectl("get", "pods", "-n", ns, "-o", "wide", "-L", kinds.LWSGroupLabel+","+kinds.LWSWorkerLabel))
	pods := groupPods(t, ns, "big")
	nodes := map[string]bool{}
	var leaders []corev1.Pod
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
		if p.Labels[kinds.LWSWorkerLabel] == "0" {
			leaders = append(leaders, p)
		}
	}
	if len(pods) != 4 || len(nodes) != 4 || len(leaders) != 2 {
		t.Fatalf("%d pods on %d nodes, %d leaders", len(pods), len(nodes), len(leaders))
	}
	groupNamesResolve(t, ns, pods)
	// The Service selects the leaders only, and a leader answers the API.
	svc, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
	selected, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(selected.Items) != 2 {
		t.Fatalf("the Service (%s) selects %d pods: %v", sel, len(selected.Items), err)
	}
	for _, p := range selected.Items {
		if p.Labels[kinds.LWSWorkerLabel] != "0" {
			t.Fatalf("the Service selects worker %s", p.Name)
		}
	}
	leaderServes(t, leaders[0], "deepseek-ai/DeepSeek-V3")
	h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "big", metav1.GetOptions{})
	if err != nil || h.Spec.ScaleTargetRef.Kind != "LeaderWorkerSet" {
		t.Fatalf("HPA: %v %+v", err, h)
	}

	// A worker killed: the group is down (the isvc says which), then back.
	var worker corev1.Pod
	for _, p := range pods {
		if p.Labels[kinds.LWSWorkerLabel] == "1" {
			worker = p
			break
		}
	}
	killed := time.Now()
	kubectl("delete", "pod", "-n", ns, worker.Name, "--wait=false")
	var meanwhile string
	testenv.Eventually(t, time.Minute, "big reports a group down", func() error {
		i, says := isvcSays(t, ns, "big")
		if i == nil || i.Status.ReadyReplicas != 1 {
			return fmt.Errorf("%s", says)
		}
		meanwhile = says
		return nil
	})
	t.Logf("%.1fs after the kill: %s", time.Since(killed).Seconds(), meanwhile)
	testenv.Eventually(t, 3*time.Minute, "big Ready again", func() error {
		i, says := isvcSays(t, ns, "big")
		if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 2 {
			return fmt.Errorf("%s", says)
		}
		return nil
	})
	t.Logf("group recovered %.1fs after the kill", time.Since(killed).Seconds())

	// A third group: no two nodes have 8 GPUs free.
	kubectl("patch", "isvc", "big", "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	var short string
	testenv.Eventually(t, time.Minute, "big names the group it cannot place", func() error {
		i, says := isvcSays(t, ns, "big")
		if i == nil || i.Status.Reason != reconcile.ReasonInsufficientGPU || !strings.Contains(says, "big-2") {
			return fmt.Errorf("%s", says)
		}
		short = says
		return nil
	})
	t.Logf("3 groups on 4 nodes: %s", short)
	// The same walk from a terminal: kubectl isvc why, through the LeaderWorkerSet.
	why := plugin(t, buildPlugin(t), "why", "big", "-n", ns)
	t.Logf("kubectl isvc why big:\n%s", why)
	for _, want := range []string{"LeaderWorkerSet", "groups desired 3", "StatefulSet", "InsufficientGPU", "big-2"} {
		if !strings.Contains(why, want) {
			t.Errorf("kubectl isvc why lacks %q", want)
		}
	}
	kubectl("delete", "isvc", "big", "-n", ns, "--wait=true", "--timeout=60s")

	// Scaling through the isvc: 2 x (2 pods of 4 GPUs) -> 3 groups, two pods a node.
	apply("mid", "  baseModel: Qwen/Qwen3-32B\n  replicas: 2\n  gpusPerReplica: 8\n  multiNode: {nodes: 2}\n")
	testenv.Eventually(t, 3*time.Minute, "mid Ready with 2 groups", func() error {
		i, says := isvcSays(t, ns, "mid")
		if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 2 {
			return fmt.Errorf("%s", says)
		}
		return nil
	})
	// A rollout with room for one more group (16 of 32 GPUs used) starts a surge group beside
	// the two serving ones, so all but LWS's last step serves at full strength: LWS's own
	// default (maxSurge 0, maxUnavailable 1) takes a group down first and runs one short for
	// the whole rollout. (LWS v0.8 releases the surge while the last old group reloads.)
	// The ready leaders are counted after every pod event, in the API server's order: a poll
	// can miss the moments between the surge group turning ready and LWS taking an old one down.
	seen := watchReadyLeaders(t, ns, "mid")
	rolled := time.Now()
	kubectl("patch", "isvc", "mid", "-n", ns, "--type=merge", "-p", `{"spec":{"env":[{"name":"ROLLOUT","value":"1"}]}}`)
	fewest, most := 2, 0
	var under time.Duration // time seen with fewer than 2 ready groups
	last := time.Now()
	testenv.Eventually(t, 3*time.Minute, "mid rolled to the new template, 2 groups ready", func() error {
		ready, current := readyLeaders(t, ns, "mid", "ROLLOUT")
		fewest, most = min(fewest, ready), max(most, ready)
		if ready < 2 {
			under += time.Since(last)
		}
		last = time.Now()
		if current != 2 || ready != 2 {
			return fmt.Errorf("%d ready leaders, %d of them current", ready, current)
		}
		return nil
	})
	if lo, hi, events := seen(); events > 0 {
		fewest, most = min(fewest, lo), max(most, hi)
	}
	t.Logf("rolled 2 groups in %.1fs: at most %d groups ready, at least %d, under 2 for about %.1fs", time.Since(rolled).Seconds(), most, fewest, under.Seconds())
	if most < 3 || fewest < 1 {
		t.Errorf("the rollout ran between %d and %d ready groups: want a surge group serving beside the 2 and never none", fewest, most)
	}

	scaled := time.Now()
	kubectl("patch", "isvc", "mid", "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	testenv.Eventually(t, 3*time.Minute, "mid Ready with 3 groups", func() error {
		i, says := isvcSays(t, ns, "mid")
		if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 3 || len(groupPods(t, ns, "mid")) != 6 {
			return fmt.Errorf("%s", says)
		}
		return nil
	})
	t.Logf("scaled 2 -> 3 groups in %.1fs", time.Since(scaled).Seconds())
	out := kubectl("get", "leaderworkerset", "mid", "-n", ns, "-o", "json")
	var lws struct {
		Spec struct{ Replicas int } `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &lws); err != nil || lws.Spec.Replicas != 3 {
		t.Fatalf("LeaderWorkerSet replicas %d (%v)", lws.Spec.Replicas, err)
	}

	// A ResourceQuota at what the 3 groups use: a 4th group's leader is refused by it. A
	// StatefulSet says so only in its FailedCreate Events; the isvc names the StatefulSet and
	// the quota, as it names a ReplicaSet's.
	applyYAML(t, ns, "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: gpus}\nspec:\n  hard: {requests.nvidia.com/gpu: \"24\"}\n")
	kubectl("patch", "isvc", "mid", "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":4}}`)
	var refused string
	testenv.Eventually(t, 2*time.Minute, "mid names the quota refusing its 4th group", func() error {
		i, says := isvcSays(t, ns, "mid")
		if i == nil || i.Status.Reason != reconcile.ReasonQuotaExceeded || !strings.Contains(says, "StatefulSet mid") || !strings.Contains(says, "exceeded quota: gpus") {
			return fmt.Errorf("%s", says)
		}
		refused = says
		return nil
	})
	t.Logf("4th group over the quota: %s", refused)
	kubectl("patch", "isvc", "mid", "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	kubectl("delete", "resourcequota", "gpus", "-n", ns)
	testenv.Eventually(t, 2*time.Minute, "mid Ready with 3 groups again", func() error {
		i, says := isvcSays(t, ns, "mid")
		if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 3 {
			return fmt.Errorf("%s", says)
		}
		return nil
	})

	// Back to one node a replica (8 GPUs fit one node): the LeaderWorkerSet is replaced by a
	// Deployment, and the Service follows the new pods.
	switched := time.Now()
	kubectl("patch", "isvc", "mid", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/multiNode"}]`)
	testenv.Eventually(t, 3*time.Minute, "mid Ready on a Deployment, its LeaderWorkerSet gone", func() error {
		i, says := isvcSays(t, ns, "mid")
		if i == nil || i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 3 {
			return fmt.Errorf("%s", says)
		}
		if _, err := env.Dyn.Resource(reconcile.LeaderWorkerSetGVR).Namespace(ns).Get(context.Background(), "mid", metav1.GetOptions{}); err == nil {
			return fmt.Errorf("LeaderWorkerSet mid still there; %s", says)
		}
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "mid", metav1.GetOptions{})
		if err != nil || d.Status.ReadyReplicas != 3 {
			return fmt.Errorf("Deployment: %v; %s", err, says)
		}
		svc, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), "mid", metav1.GetOptions{})
		if err != nil || svc.Spec.Selector[kinds.LWSWorkerLabel] != "" {
			return fmt.Errorf("Service selector %v (%v)", svc.Spec.Selector, err)
		}
		return nil
	})
	t.Logf("switched to one node a replica in %.1fs", time.Since(switched).Seconds())
}

// groupNamesResolve checks what a real cluster needs for a group to form: every pod's
// subdomain names a headless Service that selects it, and each worker's LWS_LEADER_ADDRESS
// resolves, through the cluster DNS, to its leader's pod IP.
func groupNamesResolve(t *testing.T, ns string, pods []corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	leaderIP := map[string]string{} // group index -> leader's IP
	for _, p := range pods {
		if p.Labels[kinds.LWSWorkerLabel] == "0" {
			leaderIP[p.Labels[kinds.LWSGroupLabel]] = p.Status.PodIP
		}
	}
	for _, p := range pods {
		svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, p.Spec.Subdomain, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s: subdomain %q: %v", p.Name, p.Spec.Subdomain, err)
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Selector) == 0 ||
			!labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
			t.Fatalf("pod %s: its subdomain's Service %s is not a headless Service selecting it (clusterIP %q, selector %v)",
				p.Name, svc.Name, svc.Spec.ClusterIP, svc.Spec.Selector)
		}
		if p.Labels[kinds.LWSWorkerLabel] == "0" {
			continue
		}
		addr := ""
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "LWS_LEADER_ADDRESS" {
				addr = e.Value
			}
		}
		ips, err := env.Cluster.LookupHost(ctx, addr+".svc.cluster.local.")
		if want := leaderIP[p.Labels[kinds.LWSGroupLabel]]; err != nil || len(ips) != 1 || ips[0] != want {
			t.Fatalf("worker %s: LWS_LEADER_ADDRESS %q resolves to %v (%v), want its leader's %s", p.Name, addr, ips, err, want)
		}
	}
}

// readyLeaders counts the model's ready group leaders, and those among them whose container
// has the variable env (the rollout's new template).
// watchReadyLeaders counts the ready leaders of the LeaderWorkerSet name after each pod event
// from now on; the returned func stops the watch and gives the fewest and most seen, and how
// many events there were.
func watchReadyLeaders(t *testing.T, ns, name string) func() (fewest, most, events int) {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: kinds.LWSNameLabel + "=" + name}
	l, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	readyLeader := func(p *corev1.Pod) bool {
		return p.Labels[kinds.LWSWorkerLabel] == "0" && p.DeletionTimestamp == nil && reconcile.PodReady(p)
	}
	ready := map[types.UID]bool{}
	for i := range l.Items {
		ready[l.Items[i].UID] = readyLeader(&l.Items[i])
	}
	sel.ResourceVersion = l.ResourceVersion
	w, err := env.Kube.CoreV1().Pods(ns).Watch(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fewest, most, events := math.MaxInt, 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			if ev.Type == watch.Deleted {
				delete(ready, p.UID)
			} else {
				ready[p.UID] = readyLeader(p)
			}
			n := 0
			for _, r := range ready {
				if r {
					n++
				}
			}
			fewest, most, events = min(fewest, n), max(most, n), events+1
			mu.Unlock()
		}
	}()
	return func() (int, int, int) {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return fewest, most, events
	}
}

func readyLeaders(t *testing.T, ns, name, env string) (ready, current int) {
	t.Helper()
	for _, p := range groupPods(t, ns, name) {
		if p.Labels[kinds.LWSWorkerLabel] != "0" || p.DeletionTimestamp != nil || !reconcile.PodReady(&p) {
			continue
		}
		ready++
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == env {
				current++
				break
			}
		}
	}
	return ready, current
}

// leaderServes: a group's leader answers a completion for the model at its pod IP.
func leaderServes(t *testing.T, leader corev1.Pod, model string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := hc.Post("http://"+net.JoinHostPort(leader.Status.PodIP, fmt.Sprint(reconcile.Port))+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"`+model+`","prompt":"Multi-node","max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"completion_tokens":3`) {
		t.Fatalf("leader %s: %d %s", leader.Name, resp.StatusCode, body)
	}
}
