package reconcile

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// A model whose replica spans several nodes (spec.multiNode) runs on a LeaderWorkerSet
// instead of a Deployment: one group of spec.multiNode.nodes pods per replica, the leader
// serving vLLM's API and the workers joining it through Ray. Unstructured like the other
// optional children, so the operator needs none of LWS's Go modules.
var LeaderWorkerSetGVR = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}

// LWS's own fields the operator sets (the labels LWS puts on a group's pods are package kinds').
const (
	KindLeaderWorkerSet = "LeaderWorkerSet"
	lwsAPIVersion       = "leaderworkerset.x-k8s.io/v1"
	// lwsLeaderCreated creates the workers once the leader pod exists, not once it is ready:
	// vLLM's leader is ready only after its workers joined.
	lwsLeaderCreated = "LeaderCreated"
	// lwsRecreateGroup restarts the whole group when one of its pods fails: a Ray cluster
	// that lost a node does not heal.
	lwsRecreateGroup = "RecreateGroupOnPodRestart"
	// lwsSubdomainPerReplica gives each group a headless Service named after its leader pod,
	// which LWS creates: with the default Shared policy the headless Service takes the LWS's
	// name, which the model's own ClusterIP Service already holds, so LWS skips it and
	// LWS_LEADER_ADDRESS never resolves (LWS v0.8 CreateHeadlessServiceIfNotExists).
	lwsSubdomainPerReplica = "UniquePerReplica"
	// multiNodeScript is vLLM's documented launcher for Ray clusters on LeaderWorkerSet.
	multiNodeScript = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
)

// MultiNodeUnsupported is the reason for a multi-node spec on a cluster without LWS.
const ReasonMultiNodeUnsupported = "MultiNodeUnsupported"

// isMultiNode reports whether the model's replicas span nodes.
func isMultiNode(ext *crd.SpecExtensions) bool { return ext.MultiNode != nil }

// podSpecOf is the spec one pod serves: a multi-node replica's GPUs are split over its pods.
func podSpecOf(isvc *crd.InferenceService, ext *crd.SpecExtensions) *crd.InferenceServiceSpec {
	if !isMultiNode(ext) {
		return &isvc.Spec
	}
	s := isvc.Spec
	s.GPUsPerReplica = ptr.To(isvc.Spec.GPUs() / ext.Nodes())
	return &s
}

// GPUsPerPod is what each of the model's pods requests.
func GPUsPerPod(isvc *crd.InferenceService, ext *crd.SpecExtensions) int32 {
	return podSpecOf(isvc, ext).GPUs()
}

// shellQuote quotes s for sh: the engine arguments are the user's.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// multiNodeArgs is vllm serve's command line for a group's leader: the model split tensor-
// parallel inside a node and pipeline-parallel across nodes by default, or as spec.parallelism
// splits it, over Ray.
func multiNodeArgs(isvc *crd.InferenceService, ext *crd.SpecExtensions) []string {
	tp, pp := ext.ParallelSizes(isvc.Spec.GPUs())
	args := []string{isvc.Spec.Model, "--port", portArg, "--served-model-name", ModelName(&isvc.Spec),
		"--tensor-parallel-size", strconv.Itoa(int(tp)), "--pipeline-parallel-size", strconv.Itoa(int(pp)),
		"--distributed-executor-backend", "ray"}
	if len(ext.Adapters) > 0 {
		args = append(args, EnableLoRAArg, "--max-cpu-loras", maxCPULoRAsArg)
	}
	return append(args, ext.EngineArgs...)
}

// leaderScript starts the Ray head, waits for the group's workers, then serves.
// $(LWS_GROUP_SIZE) is the kubelet's expansion of the variable LWS injects.
func leaderScript(isvc *crd.InferenceService, ext *crd.SpecExtensions) string {
	var b strings.Builder
	b.WriteString("bash " + multiNodeScript + " leader --ray_cluster_size=$(LWS_GROUP_SIZE) " + rayInitTimeout(ext) + " && exec vllm serve")
	for _, a := range multiNodeArgs(isvc, ext) {
		b.WriteString(" " + shellQuote(a))
	}
	return b.String()
}

// workerScript joins the group's Ray cluster at its leader's address.
func workerScript(ext *crd.SpecExtensions) string {
	return "bash " + multiNodeScript + " worker --ray_address=$(LWS_LEADER_ADDRESS) " + rayInitTimeout(ext)
}

// rayInitTimeout gives the group the model's startup budget to form: the script's default,
// 300 s, fails a group whose worker still waits for its image or a node, and
// RecreateGroupOnPodRestart then starts the whole group over.
func rayInitTimeout(ext *crd.SpecExtensions) string {
	return "--ray_init_timeout=" + strconv.Itoa(int(startupBudget(ext)))
}

var shellCommand = []string{"/bin/sh", "-c"}

// desiredLWS is the LeaderWorkerSet of a multi-node model: the leader template is the
// Deployment's pod template with the leader's script, the worker template the same pod
// without the API (no port, no probes: the leader's readiness is the group's).
func desiredLWS(isvc *crd.InferenceService, ext *crd.SpecExtensions, b shared) *unstructured.Unstructured {
	d := desiredDeployment(isvc, ext, b)
	leader := d.Spec.Template
	lc := &leader.Spec.Containers[0]
	lc.Command, lc.Args = shellCommand, []string{leaderScript(isvc, ext)}
	worker := *leader.DeepCopy()
	wc := &worker.Spec.Containers[0]
	wc.Args, wc.Ports = []string{workerScript(ext)}, nil
	wc.StartupProbe, wc.ReadinessProbe, wc.LivenessProbe = nil, nil, nil
	worker.Spec.ReadinessGates = nil // workers serve no adapters

	surge, unavailable := lwsRollStep(int64(isvc.Spec.Replicas))
	u := newChildUnstructured(isvc, lwsAPIVersion, KindLeaderWorkerSet)
	for k, v := range d.Labels {
		unstructured.SetNestedField(u.Object, v, "metadata", "labels", k)
	}
	u.SetAnnotations(d.Annotations)
	u.Object["spec"] = map[string]interface{}{
		"replicas":      int64(isvc.Spec.Replicas),
		"startupPolicy": lwsLeaderCreated,
		"networkConfig": map[string]interface{}{"subdomainPolicy": lwsSubdomainPerReplica},
		"rolloutStrategy": map[string]interface{}{"type": "RollingUpdate", "rollingUpdateConfiguration": map[string]interface{}{
			"maxSurge": surge, "maxUnavailable": unavailable, "partition": int64(0)}},
		"leaderWorkerTemplate": map[string]interface{}{
			"size":           int64(ext.Nodes()),
			"restartPolicy":  lwsRecreateGroup,
			"leaderTemplate": templateToUnstructured(&leader),
			"workerTemplate": templateToUnstructured(&worker),
		},
	}
	return u
}

func templateToUnstructured(t *corev1.PodTemplateSpec) map[string]interface{} {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
	if err != nil {
		panic(err) // a typed template always converts
	}
	return m
}

// lwsTemplate reads one of the LWS's pod templates; ok is false when it is missing or
// malformed (then it is rewritten).
func lwsTemplate(u *unstructured.Unstructured, name string) (corev1.PodTemplateSpec, bool) {
	var t corev1.PodTemplateSpec
	m, found, err := unstructured.NestedMap(u.Object, "spec", "leaderWorkerTemplate", name)
	if !found || err != nil {
		return t, false
	}
	return t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, &t) == nil
}

func lwsReplicas(u *unstructured.Unstructured) int32 {
	n, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		return 1
	}
	return int32(n)
}

// lwsDrifted compares the owned fields of a LeaderWorkerSet: labels, the operator's
// annotations, the count (never fighting the HPA, as the Deployment's), the group's size and
// policies, and both pod templates as the Deployment's. What LWS's webhook defaults is not
// compared.
func lwsDrifted(live, want *unstructured.Unstructured, sc Scale) bool {
	la, wa := live.GetAnnotations(), want.GetAnnotations()
	if !hasLabels(live.GetLabels(), want.GetLabels()) || la[ReplicasAnnotation] != wa[ReplicasAnnotation] || la[EnvAnnotation] != wa[EnvAnnotation] ||
		la[RaisedAnnotation] != wa[RaisedAnnotation] {
		return true
	}
	if _, change := wantedCount(lwsReplicas(live), la[ReplicasAnnotation], sc); change {
		return true
	}
	ru, _, _ := unstructured.NestedMap(live.Object, "spec", "rolloutStrategy", "rollingUpdateConfiguration")
	if surge, unavailable := lwsRollStep(int64(lwsReplicas(live))); ru["maxSurge"] != surge || ru["maxUnavailable"] != unavailable {
		return true
	}
	for _, f := range [][]string{{"startupPolicy"}, {"leaderWorkerTemplate", "restartPolicy"}, {"networkConfig", "subdomainPolicy"}} {
		l, _, _ := unstructured.NestedString(live.Object, append([]string{"spec"}, f...)...)
		w, _, _ := unstructured.NestedString(want.Object, append([]string{"spec"}, f...)...)
		if l != w {
			return true
		}
	}
	ls, _, _ := unstructured.NestedInt64(live.Object, "spec", "leaderWorkerTemplate", "size")
	ws, _, _ := unstructured.NestedInt64(want.Object, "spec", "leaderWorkerTemplate", "size")
	if ls != ws {
		return true
	}
	for _, name := range []string{"leaderTemplate", "workerTemplate"} {
		lt, ok := lwsTemplate(live, name)
		wt, _ := lwsTemplate(want, name)
		if !ok || templateDrifted(&lt, &wt, la[EnvAnnotation]) {
			return true
		}
	}
	return false
}

// setLWS writes lwsDrifted's fields of want onto out, a copy of the live object; the rest of
// out (LWS's defaults, others' fields) is kept, and the update sends it whole.
func setLWS(out, want *unstructured.Unstructured, sc Scale) {
	prevEnv := out.GetAnnotations()[EnvAnnotation]
	n, _ := wantedCount(lwsReplicas(out), out.GetAnnotations()[ReplicasAnnotation], sc)
	out.SetLabels(mergeLabels(out.GetLabels(), want.GetLabels()))
	out.SetAnnotations(setOwnedAnnotations(out.GetAnnotations(), want.GetAnnotations()))
	spec, _, _ := unstructured.NestedMap(out.Object, "spec")
	if spec == nil {
		spec = map[string]interface{}{}
	}
	lwt, _, _ := unstructured.NestedMap(spec, "leaderWorkerTemplate")
	if lwt == nil {
		lwt = map[string]interface{}{}
	}
	wspec := want.Object["spec"].(map[string]interface{})
	wlwt := wspec["leaderWorkerTemplate"].(map[string]interface{})
	spec["replicas"], spec["startupPolicy"] = int64(n), wspec["startupPolicy"]
	nc, _, _ := unstructured.NestedMap(spec, "networkConfig")
	if nc == nil {
		nc = map[string]interface{}{}
	}
	nc["subdomainPolicy"] = lwsSubdomainPerReplica
	spec["networkConfig"] = nc
	rs, _, _ := unstructured.NestedMap(spec, "rolloutStrategy")
	if rs == nil {
		rs = map[string]interface{}{"type": "RollingUpdate"}
	}
	ru, _, _ := unstructured.NestedMap(rs, "rollingUpdateConfiguration")
	if ru == nil {
		ru = map[string]interface{}{}
	}
	ru["maxSurge"], ru["maxUnavailable"] = lwsRollStep(int64(n))
	rs["rollingUpdateConfiguration"] = ru
	spec["rolloutStrategy"] = rs
	lwt["size"], lwt["restartPolicy"] = wlwt["size"], wlwt["restartPolicy"]
	for _, name := range []string{"leaderTemplate", "workerTemplate"} {
		t, _ := lwsTemplate(out, name)
		wt, _ := lwsTemplate(want, name)
		setTemplate(&t, &wt, prevEnv)
		lwt[name] = templateToUnstructured(&t)
	}
	spec["leaderWorkerTemplate"] = lwt
	out.Object["spec"] = spec
}

// groupView is a multi-node model's LeaderWorkerSet seen as the layer walk sees a
// Deployment: replicas are groups, a group is ready when its leader is ready and every one of
// its pods runs ready (LWS counts a group ready with a worker still pending), and the
// StatefulSets that own the pods stand in for the ReplicaSets, all of the current revision.
// The pods of other revisions of a rolling update count as current: LWS replaces groups
// whole, one at a time. failures are the StatefulSets' refused pod creations (their
// FailedCreate Events, by StatefulSet name), carried as the ReplicaFailure condition a
// ReplicaSet would have, so a quota refusing a group's pods is diagnosed as for a Deployment.
func groupView(lws *unstructured.Unstructured, pods []*corev1.Pod, failures map[string]string) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	size, _, _ := unstructured.NestedInt64(lws.Object, "spec", "leaderWorkerTemplate", "size")
	updated, _, _ := unstructured.NestedInt64(lws.Object, "status", "updatedReplicas")
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: lwsAPIVersion, Kind: KindLeaderWorkerSet},
		ObjectMeta: metav1.ObjectMeta{Name: lws.GetName(), Namespace: lws.GetNamespace(), UID: lws.GetUID(), Generation: lws.GetGeneration()},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(lwsReplicas(lws))},
	}
	d.Status.ObservedGeneration = d.Generation
	type group struct{ pods, ready int64 }
	groups := map[string]*group{}
	var rss []*appsv1.ReplicaSet
	seen := map[types.UID]bool{}
	statefulSet := func(name string, uid types.UID) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{Kind: "StatefulSet"}, ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: uid, Annotations: map[string]string{kinds.RevisionAnnotation: "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: lwsAPIVersion, Kind: KindLeaderWorkerSet, Name: lws.GetName(), UID: lws.GetUID(), Controller: ptr.To(true)}},
		}}
	}
	for _, p := range pods {
		if p.Labels[kinds.LWSNameLabel] != lws.GetName() || p.DeletionTimestamp != nil {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && !seen[ref.UID] {
			seen[ref.UID] = true
			rss = append(rss, statefulSet(ref.Name, ref.UID))
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		g := groups[p.Labels[kinds.LWSGroupLabel]]
		if g == nil {
			g = &group{}
			groups[p.Labels[kinds.LWSGroupLabel]] = g
		}
		g.pods++
		if PodReady(p) {
			g.ready++
		}
	}
	for _, g := range groups {
		d.Status.Replicas++
		if g.ready >= max(size, 1) && g.pods >= max(size, 1) {
			d.Status.ReadyReplicas++
		}
	}
	d.Status.UpdatedReplicas = min(int32(updated), d.Status.Replicas)
	d.Status.AvailableReplicas = d.Status.ReadyReplicas
	for name, msg := range failures {
		i := slices.IndexFunc(rss, func(rs *appsv1.ReplicaSet) bool { return rs.Name == name })
		if i < 0 {
			// Without a pod, a StatefulSet is known by its Events only.
			rss = append(rss, statefulSet(name, types.UID("statefulset/"+name)))
			i = len(rss) - 1
		}
		rss[i].Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: msg}}
	}
	sort.Slice(rss, func(i, j int) bool { return rss[i].Name < rss[j].Name })
	return d, rss
}

// groupFailuresRecheck is how often a multi-node model missing pods looks at its
// StatefulSets' Events again: a refused creation changes no object the operator watches.
const groupFailuresRecheck = 10 * time.Second

// WantsGroupFailures reports whether a multi-node model has fewer pods than its groups need,
// so the I/O layer reads its StatefulSets' FailedCreate Events (GroupFailures).
func WantsGroupFailures(in Input) bool {
	if !isMultiNode(&in.Ext) || !in.Features.LeaderWorkerSets {
		return false
	}
	l := in.Observed.LeaderWorkerSet
	if l == nil || !ControlledBy(l, in.ISVC) {
		return false
	}
	size, _, _ := unstructured.NestedInt64(l.Object, "spec", "leaderWorkerTemplate", "size")
	var live int64
	for _, p := range in.Observed.Pods {
		if p.Labels[kinds.LWSNameLabel] == l.GetName() && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			live++
		}
	}
	return live < int64(lwsReplicas(l))*max(size, 1)
}

// IsGroupStatefulSet reports whether a StatefulSet name is one LeaderWorkerSet lws makes: its
// leaders' (the LWS's own name) or a group's workers' (name-<group index>).
func IsGroupStatefulSet(lws, name string) bool {
	if name == lws {
		return true
	}
	idx, ok := strings.CutPrefix(name, lws+"-")
	if !ok || idx == "" {
		return false
	}
	_, err := strconv.Atoi(idx)
	return err == nil
}

// GroupView is groupView for readers outside the operator (the kubectl plugin's walk): the
// view carries the LeaderWorkerSet's owner references, so it is the isvc's as the LWS is.
func GroupView(lws *unstructured.Unstructured, pods []*corev1.Pod) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	d, rss := groupView(lws, pods, nil)
	d.OwnerReferences = lws.GetOwnerReferences()
	return d, rss
}

// PodReady reports the pod's Ready condition: what the Deployment and the Service count.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// IsLeaderOrSingle reports whether the pod serves the model's API: every pod of a Deployment,
// the leader of a multi-node group.
func IsLeaderOrSingle(p *corev1.Pod) bool {
	w, ok := p.Labels[kinds.LWSWorkerLabel]
	return !ok || w == "0"
}

// runningView is the child that runs the model's pods, as the layer walk reads it: our
// Deployment and its ReplicaSets, or our LeaderWorkerSet's groupView; ok is false when
// neither is ours yet.
func runningView(in *Input) (*appsv1.Deployment, []*appsv1.ReplicaSet, bool) {
	if isMultiNode(&in.Ext) {
		l := in.Observed.LeaderWorkerSet
		if l == nil || !in.Features.LeaderWorkerSets || !ControlledBy(l, in.ISVC) {
			return nil, nil, false
		}
		d, rss := groupView(l, in.Observed.Pods, in.Observed.GroupFailures)
		return d, rss, true
	}
	d := in.Observed.Deployment
	if d == nil || !ControlledBy(d, in.ISVC) {
		return nil, nil, false
	}
	return d, in.Observed.ReplicaSets, true
}

// kindOf names the walk's top layer in messages: a Deployment, or a LeaderWorkerSet seen
// through groupView.
func kindOf(d *appsv1.Deployment) string {
	if d.Kind == KindLeaderWorkerSet {
		return KindLeaderWorkerSet
	}
	return "Deployment"
}

// DesiredPods is how many model pods the scaled child asks for now: the Deployment's replicas
// (the HPA's choice), or the LeaderWorkerSet's groups times the nodes of each; the spec's
// replicas while the child is not the model's.
func DesiredPods(isvc *crd.InferenceService, ext *crd.SpecExtensions, obs Observed) int64 {
	replicas := int64(isvc.Spec.Replicas)
	if d := obs.Deployment; d != nil && ControlledBy(d, isvc) && d.Spec.Replicas != nil {
		replicas = int64(*d.Spec.Replicas)
	}
	if !isMultiNode(ext) {
		return replicas
	}
	replicas = int64(isvc.Spec.Replicas)
	if l := obs.LeaderWorkerSet; l != nil && ControlledBy(l, isvc) {
		replicas = int64(lwsReplicas(l))
	}
	return replicas * int64(ext.Nodes())
}

// lwsRollStep is a rollout's maxSurge and maxUnavailable for a LeaderWorkerSet of replicas
// groups. LWS's default (surge 0, unavailable 1) takes a group down first. From two groups,
// a Deployment's 25% each: a new group starts beside the old ones (the surge rounds up to at
// least 1) and under four groups none goes before one is ready (the unavailability rounds
// down to 0), though LWS v0.8 releases its surge group while the last old group reloads, so
// the tail runs one group short (rollingUpdateParameters' wantReplicas). A percentage, as LWS
// copies maxUnavailable into its StatefulSet, whose validation refuses an integer 0. One
// group cannot surge in LWS v0.8 (wantReplicas keeps 1), and with unavailability 0 its
// partition never moves: there a rollout is the reload outage LWS's default makes.
func lwsRollStep(replicas int64) (maxSurge, maxUnavailable interface{}) {
	if replicas >= 2 {
		return "25%", "25%"
	}
	return int64(0), int64(1)
}
