package reconcile

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
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
)

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

// multiNodeArgs is the server's command line for a group's leader: the model split tensor-
// parallel inside a node and pipeline-parallel across nodes by default, or as spec.parallelism
// splits it, across the group's pods.
func multiNodeArgs(isvc *crd.InferenceService, ext *crd.SpecExtensions) []string {
	tp, pp := ext.ParallelSizes(isvc.Spec.GPUs())
	sv := engine.Serve{Model: ModelArg(&isvc.Spec, ext), ServedName: ModelName(&isvc.Spec),
		TensorParallel: int(tp), PipelineParallel: int(pp), AcrossPods: true, Extra: ext.EngineArgs}
	if len(ext.Adapters) > 0 {
		sv.Adapters, sv.MaxLoRAs, sv.MaxCPULoRAs = true, maxLoRAs, maxCPULoRAs
	}
	return engineOf(isvc).ServeArgs(sv)
}

// groupScripts are the leader's script (start the group, wait for its workers, then serve) and
// the workers' (join the leader), given the model's startup budget to form: a group whose
// worker still waits for its image or a node would otherwise fail, and
// RecreateGroupOnPodRestart start the whole group over.
func groupScripts(isvc *crd.InferenceService, ext *crd.SpecExtensions) (leader, worker string) {
	return engineOf(isvc).MultiNode(multiNodeArgs(isvc, ext), startupBudget(ext))
}

var shellCommand = []string{"/bin/sh", "-c"}

// desiredLWS is the LeaderWorkerSet of a multi-node model: the leader template is the
// Deployment's pod template with the leader's script, the worker template the same pod
// without the API (no port, no probes: the leader's readiness is the group's).
func desiredLWS(isvc *crd.InferenceService, ext *crd.SpecExtensions, b shared) *unstructured.Unstructured {
	d := desiredDeployment(isvc, ext, b)
	leader := d.Spec.Template
	lc := &leader.Spec.Containers[0]
	leaderScript, workerScript := groupScripts(isvc, ext)
	lc.Command, lc.Args = shellCommand, []string{leaderScript}
	worker := *leader.DeepCopy()
	wc := &worker.Spec.Containers[0]
	wc.Args, wc.Ports = []string{workerScript}, nil
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
		la[PlacementAnnotation] != wa[PlacementAnnotation] || la[RaisedAnnotation] != wa[RaisedAnnotation] {
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
		if !ok || templateDrifted(&lt, &wt, priorOf(la)) {
			return true
		}
	}
	return false
}

// setLWS writes lwsDrifted's fields of want onto out, a copy of the live object; the rest of
// out (LWS's defaults, others' fields) is kept, and the update sends it whole.
func setLWS(out, want *unstructured.Unstructured, sc Scale) {
	prev := priorOf(out.GetAnnotations())
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
		setTemplate(&t, &wt, prev)
		lwt[name] = templateToUnstructured(&t)
	}
	spec["leaderWorkerTemplate"] = lwt
	out.Object["spec"] = spec
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
