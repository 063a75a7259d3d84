package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

var (
	workloadGVR     = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
	clusterQueueGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
)

// startKueue runs Kueue (KUEUE_BIN, built by make kueue) against the suite's cluster until the
// test ends. Without KUEUE_BIN the test is skipped on a developer's machine and fails in CI,
// where make test always builds it.
func startKueue(t *testing.T) *operator.Kueue {
	t.Helper()
	return operator.RunForTest(testenv.Ctx(t, 3*time.Minute), t, env.Cluster, operator.KueueBinEnv, "kueue", filepath.Join(env.Dir, "kueue"), operator.StartKueue)
}

// walkFile is one of the manifests of the Kueue walk in docs/multi-tenancy.md, which this test runs.
func walkFile(name string) string { return filepath.Join(env.Root, "test", "kueue", "walk", name) }

// TestKueueTeamQuotaOnlinePreemptsOffline: a team with a 16-GPU quota runs an online model (4 x 2
// GPUs, high priority, Kueue-admitted through its Deployment's pods) and offline Jobs filling the
// rest. At peak the model scales to 6 replicas. With the ResourceQuota equal to the team's Kueue
// quota, the API server refuses the model's new pods before Kueue sees them (the isvc names the
// quota; Kueue preempts nothing); with the ResourceQuota leaving room for the gated pods, Kueue
// preempts offline work, which is requeued (not failed) and resumes when the model scales down,
// and the model's pods, under their PDB, are never touched. Last, Kueue refuses a new queue for
// the serving model, and the isvc says so.
func TestKueueTeamQuotaOnlinePreemptsOffline(t *testing.T) {
	startKueue(t)
	// Registered after Kueue's stop, so it runs before it: the suite's operator back.
	t.Cleanup(func() { restartWith(t) })
	restartWith(t) // discovers Kueue's Workloads, served now
	const ns, isvc = "team-a", "chat"
	for _, n := range []string{ns, "team-b"} {
		env.CreateNamespace(t, n)
		env.Kubectl(t, "label", "namespace", n, operator.KueueNamespaceLabel+"=true")
	}
	env.Kubectl(t, "apply", "-f", walkFile("cluster.yaml"))
	t.Cleanup(func() {
		// The team's pods go first, while Kueue still runs to release their finalizers.
		ctx := testenv.Ctx(t, 2*time.Minute)
		_, _, _ = env.Cluster.Kubectl(ctx, "delete", "-n", ns, "isvc,jobs", "--all", "--wait=false")
		testenv.Eventually(t, 90*time.Second, "team-a's pods and workloads gone", func() error {
			pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			if n := len(pods.Items); n > 0 {
				return fmt.Errorf("%d pods left", n)
			}
			// Kueue lifts its finalizer from a Workload whose owner is gone; stopped first, it
			// would leave the namespace terminating.
			wls, err := env.Dyn.Resource(workloadGVR).Namespace(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			if n := len(wls.Items); n > 0 {
				return fmt.Errorf("%d workloads left", n)
			}
			return nil
		})
		_, _, _ = env.Cluster.Kubectl(ctx, "delete", "--ignore-not-found", "clusterqueue/team-a", "clusterqueue/team-b",
			"resourceflavor/gpu", "priorityclass/online-high", "priorityclass/offline-low")
	})
	env.Kubectl(t, "apply", "-n", ns, "-f", walkFile("team-a.yaml"))

	tl := newKueueTimeline(t, ns, isvc)
	defer tl.stop()
	step := func(what string) {
		tl.mark(what)
		t.Logf("kubectl get isvc -n %s:\n%s", ns, env.Kubectl(t, "get", "isvc", "-n", ns))
		t.Logf("kubectl get clusterqueues -o wide:\n%s", env.Kubectl(t, "get", "clusterqueues", "-o", "wide"))
	}

	// 1. The online model at 4 x 2 GPUs, each pod admitted by Kueue.
	env.Kubectl(t, "apply", "-n", ns, "-f", walkFile("model.yaml"))
	testenv.Eventually(t, 2*time.Minute, "4 online pods running", func() error { return tl.want(4, -1, 4, -1) })
	env.WaitPhase(t, ns, isvc, crd.PhaseReady, time.Minute)
	step("online model at 4 replicas")
	waitAdmitted(t, ns, isvc, "Admitted", "4 pods admitted by ClusterQueue team-a")
	baseline := tl.onlinePodUIDs()
	tl.watchBaseline(baseline)

	// 2. Offline evaluation fills the rest of the team's 16 GPUs.
	env.Kubectl(t, "apply", "-n", ns, "-f", walkFile("offline-jobs.yaml"))
	testenv.Eventually(t, 2*time.Minute, "4 offline jobs running", func() error { return tl.want(4, 4, 4, 4) })
	step("offline jobs fill the quota")

	// 3. Peak with the ResourceQuota at the team's 16: the new pods are refused at creation.
	env.Kubectl(t, "patch", "isvc", "-n", ns, isvc, "--type=merge", "-p", `{"spec":{"replicas":6}}`)
	i := waitReason(t, ns, isvc, "QuotaExceeded", 90*time.Second)
	step("peak, quota 16: the model's new pods refused by the ResourceQuota")
	if msg := readyMessage(i); !strings.Contains(msg, "exceeded quota: team-a-gpus") {
		t.Errorf("the isvc does not name the quota: %q", msg)
	}
	if s := tl.sample(); s.wlPending[online] != 0 || s.wlAdmitted[offline] != 4 {
		t.Errorf("with the pods refused, Kueue should have nothing to admit and preempt nothing: %s", s)
	}

	// 4. The ResourceQuota leaves room for the model's gated pods (16 + 2 x 2): Kueue, the cap
	// of what runs, preempts offline work for them.
	env.Kubectl(t, "patch", "resourcequota", "-n", ns, "team-a-gpus", "--type=merge", "-p", `{"spec":{"hard":{"requests.nvidia.com/gpu":"20"}}}`)
	tl.mark("quota raised to 20: room for the gated pods")
	testenv.Eventually(t, 3*time.Minute, "6 online pods running", func() error { return tl.want(6, -1, 6, -1) })
	testenv.Eventually(t, time.Minute, "the model serving at 6 replicas", func() error {
		i, err := env.ISVC(ns, isvc)
		if err != nil {
			return err
		}
		if i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != 6 {
			return fmt.Errorf("phase %s reason %s, %d ready", i.Status.Phase, i.Status.Reason, i.Status.ReadyReplicas)
		}
		return nil
	})
	testenv.Eventually(t, time.Minute, "the offline work requeued", func() error {
		s := tl.sample()
		if s.preempted == 0 {
			return fmt.Errorf("no offline workload preempted yet: %s", s)
		}
		if s.jobsFailed > 0 {
			return fmt.Errorf("a preempted job failed: %s", s)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "the ClusterQueue's status caught up", tl.cqSettled)
	step("peak, quota 20: the model at 6 replicas, offline work preempted")
	// Past its nominal 16 GPUs, team-a borrows from team-b's 2 in the cohort: what team-b may
	// reclaim by preempting team-a's workloads, the isvc says.
	if s := tl.sample(); s.cqBorrowed > 0 {
		waitAdmitted(t, ns, isvc, "BorrowingQuota", fmt.Sprintf("ClusterQueue team-a borrows %d nvidia.com/gpu (flavor gpu) from its cohort", s.cqBorrowed))
	} else {
		t.Logf("team-a borrows nothing at this peak (%s): the borrowing message is not checked", s)
	}
	t.Logf("kubectl get workloads -n %s:\n%s", ns, env.Kubectl(t, "get", "workloads", "-n", ns))
	t.Logf("Kueue's preemption events:\n%s", env.Kubectl(t, "get", "events", "-n", ns, "--field-selector", "reason=Preempted",
		"-o", "custom-columns=OBJECT:.involvedObject.name,MESSAGE:.message"))
	peak := tl.sample()
	if peak.wlPending[offline] == 0 {
		t.Errorf("at peak some offline work should wait for the model to scale down: %s", peak)
	}
	switch msg, ok := tl.gatedMessage(waitingForAdmission); {
	case !ok:
		t.Errorf("the isvc never said %s while its pods were gated (reasons seen while gated: %v)",
			waitingForAdmission, tl.gatedReasons())
	case !strings.Contains(msg, "kueue.x-k8s.io/admission") || !strings.Contains(msg, "team-a"):
		t.Errorf("the %s message does not name Kueue's gate and the queue: %q", waitingForAdmission, msg)
	default:
		t.Logf("while the pods were gated: %s: %s", waitingForAdmission, msg)
	}
	// Kueue's own account of the wait reached the isvc: the GPUs its quota lacks and the
	// preemption it started for the model's pods (a window the sampling may miss: logged).
	said := tl.said()
	if !slices.ContainsFunc(said, func(w string) bool {
		return strings.Contains(w, "nvidia.com/gpu") || strings.Contains(w, "Pending the preemption of")
	}) {
		t.Errorf("the isvc never relayed Kueue's account of its gated pods; it relayed: %q", said)
	}
	t.Logf("Kueue's words relayed by the isvc while its pods were gated: %q", said)

	// 5. The model scales down: the offline work is admitted again and runs.
	env.Kubectl(t, "patch", "isvc", "-n", ns, isvc, "--type=merge", "-p", `{"spec":{"replicas":4}}`)
	testenv.Eventually(t, 2*time.Minute, "offline work resumed", func() error { return tl.want(4, 4, 4, 4) })
	testenv.Eventually(t, 30*time.Second, "the ClusterQueue's status caught up", tl.cqSettled)
	step("model back to 4 replicas, offline work resumed")
	waitAdmitted(t, ns, isvc, "Admitted", "4 pods admitted by ClusterQueue team-a")
	end := tl.sample()
	if end.jobsFailed > 0 {
		t.Errorf("offline jobs failed: %s", end)
	}
	// The PDB held: Kueue preempted only offline work; the model's first pods served throughout.
	if gone := slices.DeleteFunc(slices.Clone(baseline), func(u types.UID) bool { return slices.Contains(tl.onlinePodUIDs(), u) }); len(gone) > 0 {
		t.Errorf("online pods from before the peak were removed: %v", gone)
	}
	held, ready := tl.minBaseline()
	if held < len(baseline) {
		t.Errorf("the model's PDB did not hold: only %d of its %d pods from before the peak were left untouched at one moment", held, len(baseline))
	}
	t.Logf("of the model's %d pods from before the peak, at least %d were ready at every sample", len(baseline), ready)

	// 6. What Kueue refuses the operator: the queue of a serving model. Kueue's Deployment
	// webhook keeps kueue.x-k8s.io/queue-name immutable while the Deployment has ready pods, so
	// the operator holds the queue back (other changes would still land) and the isvc says how
	// to move it; the model keeps serving. The way through: scale to 0, then back up
	// (TestKueueQueueChangeLetsOtherChangesLand).
	applyYAML(t, ns, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: batch}\nspec: {clusterQueue: team-a}\n")
	env.Kubectl(t, "patch", "isvc", "-n", ns, isvc, "--type=merge", "-p", `{"spec":{"queueName":"batch"}}`)
	i = waitReason(t, ns, isvc, reconcile.ReasonQueueChangeWaiting, time.Minute)
	step("queueName changed on the serving model: held, as Kueue would refuse it")
	if c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionProgressing); c == nil || !strings.Contains(c.Message, "LocalQueue team-a") {
		t.Errorf("the isvc does not say the queue change waits: %+v", c)
	}
	if i.Status.ReadyReplicas != 4 {
		t.Errorf("the model stopped serving: %d ready", i.Status.ReadyReplicas)
	}
	env.Kubectl(t, "patch", "isvc", "-n", ns, isvc, "--type=merge", "-p", `{"spec":{"queueName":"team-a"}}`)
	env.WaitPhase(t, ns, isvc, crd.PhaseReady, time.Minute)
	step("queueName back: Ready")

	// 7. More than the cohort holds (20 x 2 GPUs against 18, the HPA's floor 10 x 2): with the
	// ResourceQuota out of the way, Kueue preempts every offline job and admits 9 pods; the
	// others wait, and the isvc says where the nearest stands, from Kueue's visibility API.
	t.Cleanup(func() {
		if t.Failed() {
			out, errOut, _ := env.Cluster.Kubectl(context.Background(), "get", "-n", ns, "isvc,deploy,rs,hpa,pods,workloads", "-o", "wide")
			t.Logf("at the failure:\n%s%s", out, errOut)
			out, _, _ = env.Cluster.Kubectl(context.Background(), "get", "-n", ns, "isvc", isvc, "-o", "yaml")
			t.Logf("%s", out)
		}
	})
	env.Kubectl(t, "patch", "resourcequota", "-n", ns, "team-a-gpus", "--type=merge", "-p", `{"spec":{"hard":{"requests.nvidia.com/gpu":"60"}}}`)
	env.Kubectl(t, "patch", "isvc", "-n", ns, isvc, "--type=merge", "-p", `{"spec":{"replicas":20}}`)
	c := waitAdmitted(t, ns, isvc, "WaitingForAdmission", "pods wait for admission in LocalQueue team-a; the nearest has 0 workloads ahead of it in its LocalQueue")
	step("beyond the cohort: 9 pods admitted, the others waiting")
	t.Logf("kubectl get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/%s/localqueues/team-a/pendingworkloads:\n%s", ns,
		env.Kubectl(t, "get", "--raw", "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/"+ns+"/localqueues/team-a/pendingworkloads"))
	// The Ready message's first waiting pod has its position once Kueue has queued its Workload.
	testenv.Eventually(t, time.Minute, "the position in the Ready message", func() error {
		i, err := env.ISVC(ns, isvc)
		if err != nil {
			return err
		}
		if msg := readyMessage(i); i.Status.Phase == crd.PhaseFailed || !strings.Contains(msg, "ahead of it in its LocalQueue") {
			return fmt.Errorf("phase %s: %q", i.Status.Phase, msg)
		}
		t.Logf("Ready: %s", readyMessage(i))
		return nil
	})
	t.Logf("Admitted %s %s: %s", c.Status, c.Reason, c.Message)
	why := plugin(t, buildPlugin(t), "why", isvc, "-n", ns)
	t.Logf("kubectl isvc why %s:\n%s", isvc, why)
	if !strings.Contains(why, "LocalQueue team-a") || !strings.Contains(why, "Admitted False") {
		t.Errorf("kubectl isvc why has no Kueue row for the waiting model")
	}
}

// waitAdmitted waits until the isvc's Admitted condition has reason and a message containing
// want, and returns it.
func waitAdmitted(t *testing.T, ns, name, reason, want string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testenv.Eventually(t, time.Minute, fmt.Sprintf("Admitted %s: %s", reason, want), func() error {
		i, err := env.ISVC(ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionAdmitted)
		if c == nil {
			return fmt.Errorf("no Admitted condition")
		}
		if c.Reason != reason || !strings.Contains(c.Message, want) {
			return fmt.Errorf("Admitted %s %s: %s", c.Status, c.Reason, c.Message)
		}
		got = *c
		return nil
	})
	t.Logf("isvc Admitted %s %s: %s", got.Status, got.Reason, got.Message)
	return got
}

// waitingForAdmission is the isvc's reason while Kueue's scheduling gate holds its pods.
const waitingForAdmission = "WaitingForAdmission"

// Workload classes in the timeline.
const (
	online  = 0
	offline = 1
)

// kueueSample is the team's state at one moment.
type kueueSample struct {
	gpusRunning, gpusGated [2]int64
	podsRunning            [2]int
	wlAdmitted, wlPending  [2]int
	preempted, jobsFailed  int
	cqUsed, cqBorrowed     int64
	cqPending              int64
	quotaUsed              int64
	reason                 string
	pdbAllowed             int32 // the model's PDB's disruptionsAllowed; -1 without one
}

func (s kueueSample) String() string {
	return fmt.Sprintf("GPUs online %d running + %d gated, offline %d running | workloads online %d admitted %d pending, offline %d admitted %d pending, %d preempted so far | team-a CQ GPUs %d (borrowed %d), ResourceQuota used %d | PDB allows %d | isvc %s",
		s.gpusRunning[online], s.gpusGated[online], s.gpusRunning[offline],
		s.wlAdmitted[online], s.wlPending[online], s.wlAdmitted[offline], s.wlPending[offline], s.preempted,
		s.cqUsed, s.cqBorrowed, s.quotaUsed, s.pdbAllowed, s.reason)
}

// kueueTimeline samples the team every half second and logs each change, with the time since
// the test began: GPUs by workload, admitted and pending workloads, the ClusterQueue's usage.
type kueueTimeline struct {
	t      *testing.T
	ns     string
	isvc   string
	start  time.Time
	cancel context.CancelFunc
	// done and relayed close when the sampler and the watch of the isvc have stopped.
	done, relayed chan struct{}
	mu            sync.Mutex
	last          string
	gated         map[string]string // isvc reasons seen while an online pod was gated, and a message
	// kueueSaid are Kueue's words on a gated pod's Workload, as the isvc's message gave them.
	kueueSaid []string
	evicted   map[string]bool // offline workloads seen preempted
	// baseline are the model's pods before the peak; minHeld the fewest of them ever present and
	// not terminating (what the PDB protects), minReady the fewest ever ready (a figure: a
	// readiness probe that times out on a loaded machine is not a disruption).
	baseline          map[types.UID]bool
	minHeld, minReady int
}

func newKueueTimeline(t *testing.T, ns, isvc string) *kueueTimeline {
	ctx, cancel := context.WithCancel(context.Background())
	tl := &kueueTimeline{t: t, ns: ns, isvc: isvc, start: time.Now(), cancel: cancel, done: make(chan struct{}),
		gated: map[string]string{}, evicted: map[string]bool{}, minHeld: 1 << 30, minReady: 1 << 30}
	tl.relayed = make(chan struct{})
	go func() {
		defer close(tl.relayed)
		tl.watchRelays(ctx)
	}()
	go func() {
		defer close(tl.done)
		for {
			tl.sample()
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond): // sampling period
			}
		}
	}()
	return tl
}

func (tl *kueueTimeline) stop() { tl.cancel(); <-tl.done; <-tl.relayed }

// watchRelays records each different account of Kueue's the isvc's status gave, from every
// write of it (a watch, not the sampler: the account may stand for less than a sampling period).
func (tl *kueueTimeline) watchRelays(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := env.Dyn.Resource(crd.Resource).Namespace(tl.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + tl.isvc})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // a retry period after a refused watch
			}
			continue
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			i, err := crd.FromUnstructured(u)
			if err != nil {
				continue
			}
			_, says, ok := strings.Cut(readyMessage(i), "; Kueue Workload ")
			if !ok {
				continue
			}
			says, _, _ = strings.Cut(says, "; ")
			_, words, _ := strings.Cut(says, ": ")
			tl.mu.Lock()
			if words != "" && !slices.Contains(tl.kueueSaid, words) {
				tl.kueueSaid = append(tl.kueueSaid, words)
				tl.t.Logf("t=%5.1fs isvc relays Kueue: %s", time.Since(tl.start).Seconds(), words)
			}
			tl.mu.Unlock()
		}
		w.Stop()
	}
}

func (tl *kueueTimeline) mark(what string) {
	tl.t.Logf("t=%5.1fs --- %s", time.Since(tl.start).Seconds(), what)
}

// sample reads the team's state, records what the assertions need and logs it when it changed.
func (tl *kueueTimeline) sample() kueueSample {
	var s kueueSample
	ctx := context.Background()
	pods, err := env.Kube.CoreV1().Pods(tl.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s
	}
	gatedNow := false
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		class := offline
		if p.Labels[kinds.InstanceLabel] == tl.isvc {
			class = online
		}
		gpus := int64(0)
		for _, c := range p.Spec.Containers {
			gpus += c.Resources.Requests.Name("nvidia.com/gpu", "").Value()
		}
		switch {
		case len(p.Spec.SchedulingGates) > 0:
			s.gpusGated[class] += gpus
			gatedNow = gatedNow || class == online
		case p.Status.Phase == corev1.PodRunning:
			s.gpusRunning[class] += gpus
			s.podsRunning[class]++
		}
	}
	wls, err := env.Dyn.Resource(workloadGVR).Namespace(tl.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, w := range wls.Items {
		class := offline
		if owners := w.GetOwnerReferences(); len(owners) > 0 && owners[0].Kind == "Pod" {
			class = online
		}
		conds := workloadConditions(&w)
		switch {
		case conds["Finished"] == "True":
		case conds["Admitted"] == "True":
			s.wlAdmitted[class]++
		default:
			s.wlPending[class]++
		}
		if class == offline && conds["Preempted"] == "True" {
			tl.evicted[w.GetName()] = true
		}
	}
	for range tl.evicted {
		s.preempted++
	}
	if jobs, err := env.Kube.BatchV1().Jobs(tl.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, j := range jobs.Items {
			for _, c := range j.Status.Conditions {
				if c.Type == "Failed" && c.Status == corev1.ConditionTrue {
					s.jobsFailed++
				}
			}
		}
	}
	if cq, err := env.Dyn.Resource(clusterQueueGVR).Get(ctx, "team-a", metav1.GetOptions{}); err == nil {
		s.cqPending, _, _ = unstructured.NestedInt64(cq.Object, "status", "pendingWorkloads")
		flavors, _, _ := unstructured.NestedSlice(cq.Object, "status", "flavorsReservation")
		for _, f := range flavors {
			res, _, _ := unstructured.NestedSlice(f.(map[string]any), "resources")
			for _, r := range res {
				m := r.(map[string]any)
				if m["name"] == "nvidia.com/gpu" {
					s.cqUsed += quantity(m["total"])
					s.cqBorrowed += quantity(m["borrowed"])
				}
			}
		}
	}
	if q, err := env.Kube.CoreV1().ResourceQuotas(tl.ns).Get(ctx, "team-a-gpus", metav1.GetOptions{}); err == nil {
		s.quotaUsed = q.Status.Used.Name("requests.nvidia.com/gpu", "").Value()
	}
	if i, err := env.ISVC(tl.ns, tl.isvc); err == nil {
		s.reason = strings.TrimSuffix(fmt.Sprintf("%s/%s", i.Status.Phase, i.Status.Reason), "/")
		if _, seen := tl.gated[i.Status.Reason]; gatedNow && !seen {
			tl.gated[i.Status.Reason] = readyMessage(i)
		}
	}
	s.pdbAllowed = -1
	baselineReady, baselineHeld := 0, 0
	for _, p := range pods.Items {
		if tl.baseline[p.UID] {
			if podReady(&p) {
				baselineReady++
			}
			if p.DeletionTimestamp == nil {
				baselineHeld++
			}
		}
	}
	if pdb, err := env.Kube.PolicyV1().PodDisruptionBudgets(tl.ns).Get(ctx, tl.isvc, metav1.GetOptions{}); err == nil {
		s.pdbAllowed = pdb.Status.DisruptionsAllowed
	}
	if tl.baseline != nil {
		tl.minReady = min(tl.minReady, baselineReady)
		tl.minHeld = min(tl.minHeld, baselineHeld)
	}
	if line := s.String(); line != tl.last {
		tl.last = line
		tl.t.Logf("t=%5.1fs %s", time.Since(tl.start).Seconds(), line)
	}
	return s
}

// want checks the running pods and admitted workloads of each class; -1 is any.
func (tl *kueueTimeline) want(onlinePods, offlinePods, onlineAdmitted, offlineAdmitted int) error {
	s := tl.sample()
	for _, c := range []struct{ got, want int }{
		{s.podsRunning[online], onlinePods}, {s.podsRunning[offline], offlinePods},
		{s.wlAdmitted[online], onlineAdmitted}, {s.wlAdmitted[offline], offlineAdmitted},
	} {
		if c.want >= 0 && c.got != c.want {
			return fmt.Errorf("%s", s)
		}
	}
	return nil
}

// watchBaseline starts counting, at every sample, how many of uids are ready.
func (tl *kueueTimeline) watchBaseline(uids []types.UID) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.baseline = map[types.UID]bool{}
	for _, u := range uids {
		tl.baseline[u] = true
	}
}

// minBaseline is the fewest of the baseline pods ever untouched, and ever ready, at a sample.
func (tl *kueueTimeline) minBaseline() (held, ready int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.minHeld, tl.minReady
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// cqSettled: team-a's ClusterQueue status (written by Kueue in batches) counts what runs and
// what waits, so the step's kubectl output agrees with the workloads.
func (tl *kueueTimeline) cqSettled() error {
	s := tl.sample()
	if s.cqUsed != s.gpusRunning[online]+s.gpusRunning[offline] || s.cqPending != int64(s.wlPending[online]+s.wlPending[offline]) {
		return fmt.Errorf("%s; ClusterQueue pending %d", s, s.cqPending)
	}
	return nil
}

func (tl *kueueTimeline) onlinePodUIDs() []types.UID {
	pods, err := env.Kube.CoreV1().Pods(tl.ns).List(context.Background(), metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + tl.isvc})
	if err != nil {
		tl.t.Fatal(err)
	}
	var uids []types.UID
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			uids = append(uids, p.UID)
		}
	}
	return uids
}

// gatedMessage is the isvc's message the first time it gave reason while an online pod was
// gated, and whether it did.
func (tl *kueueTimeline) gatedMessage(reason string) (string, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	msg, ok := tl.gated[reason]
	return msg, ok
}

func (tl *kueueTimeline) said() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.kueueSaid)
}

func (tl *kueueTimeline) gatedReasons() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []string
	for r := range tl.gated {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// workloadConditions maps a Workload's condition types to their status.
func workloadConditions(w *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		t, _ := m["type"].(string)
		st, _ := m["status"].(string)
		out[t] = st
	}
	return out
}

// quantity reads a status quantity ("16", "2k") as an integer; 0 when absent or malformed.
func quantity(v any) int64 {
	s, _ := v.(string)
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return q.Value()
}
