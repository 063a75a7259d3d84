// Package reconcile is the decision, step 3 of the pipeline (informers -> queue -> controller
// sync -> reconcile -> controller apply): a pure function from an InferenceService and the
// children its caches hold to the actions to take and the status to report. It owns the
// desired children and the label vocabulary they carry, what the caches keep of each child,
// the owned-field drift/set pairs, status and the layer diagnosis; its cause vocabulary
// (every reason, every rank and which reasons fail) is one file, causes.go. It cannot reach a
// client, take a context or read the clock (TestPure): time is an input.
package reconcile

import (
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/inferenceservice-operator/crd"
)

// Reconcile is the controller's core, a pure function of the spec and the observed children:
// create what is missing, update only owned fields that differ, delete what should not exist,
// never touch a child someone else controls, and compute the status.
func Reconcile(in Input) Output {
	// A model that scales to zero is decided as its current state asks: a fixed 0 asleep, the
	// HPA's bounds from 1 awake.
	sleep := decideIdle(&in)
	in.ISVC, in.Ext = sleep.view(in.ISVC, in.Ext)
	isvc := in.ISVC
	var out Output
	built := desiredChildren(isvc, &in.Ext, in.Features) // on the stack: every resync builds it
	want := &built
	sleep.annotate(want)
	activated := sleep.on && in.Features.Activator.Name != ""
	if activated && want.HTTPRoute != nil {
		// Through the activator always: it holds requests at zero and counts them awake. The
		// pool route's picker would hide both from it.
		want.HTTPRoute = withActivatorBackend(want.HTTPRoute, isvc, in.Features.Activator, in.Features.ActivatorPort)
		want.Pool = poolChildren{}
	}

	sc := want.Scale
	if isMultiNode(&in.Ext) && !in.Features.LeaderWorkerSets {
		// Refused, and nothing changes: a serving single-node model keeps serving.
		out.Causes = []Cause{{RankSpec, ReasonMultiNodeUnsupported, "spec.multiNode needs LeaderWorkerSet (" + LeaderWorkerSetGVR.GroupVersion().String() +
			"), which this cluster does not serve (or the operator started before it was installed): install LeaderWorkerSet and restart the operator, or remove spec.multiNode"}}
		out.Status = WithCauses(observedStatus(in, want.Selector), isvc, out.Causes, in.Now)
		a, _ := decideAutoscaling(isvc, in.Observed.HPA, nil, in.Observed.Pods, in.Observed.MetricsAPI, in.Now.Time)
		a.set(&out.Status, isvc, in.Now)
		return out
	}
	liveD := in.Observed.Deployment
	hold := decideRaise(anchorAnnotations(liveD, in.Observed.LeaderWorkerSet), sc, in.Observed.Pods, DefaultRaiseHold, in.Now.Time)
	hold.apply(want)
	var cnr canary           // a canary rollout's decision (canary.go); off without one
	var anchor metav1.Object // the live child the others hang on: the Deployment or the LeaderWorkerSet
	var queueCause *Cause
	if wantD := want.Deployment; wantD != nil {
		var move queueMove
		if liveD != nil && ControlledBy(liveD, isvc) {
			if move = decideQueueMove(isvc, liveD); move.hold {
				wantD = withQueueOf(wantD, liveD)
			}
			queueCause = move.cause
		}
		liveH := in.Observed.HPA
		wantD, dsc := holdForHPAMin(liveD, wantD, liveH, liveH != nil && want.HPA != nil && ControlledBy(liveH, isvc), sc)
		if cnr = decideCanary(&in, want, liveD, want.Pool.Pool != nil); cnr.on {
			if cnr.plan.HoldStable && liveD != nil && ControlledBy(liveD, isvc) {
				wantD = holdStable(wantD, liveD)
			} else {
				wantD = withRevision(wantD, cnr.revision)
			}
		}
		switch {
		case liveD == nil:
			out.Actions = append(out.Actions, Action{Verb: Create, Kind: "Deployment", Object: wantD, Scale: sc})
		case !ControlledBy(liveD, isvc):
			out.conflict(isvc, "Deployment", liveD)
		case deploymentDrifted(liveD, wantD, dsc):
			upd := liveD.DeepCopy()
			setDeployment(upd, wantD, dsc)
			out.Actions = append(out.Actions, Action{Verb: Update, Kind: "Deployment", Object: upd, Cached: liveD, Scale: dsc})
		}
		if liveD != nil {
			anchor = liveD
		}
		// Back from multi-node: the LeaderWorkerSet goes as the Deployment comes.
		if l := in.Observed.LeaderWorkerSet; in.Features.LeaderWorkerSets && l != nil && ControlledBy(l, isvc) {
			out.add(Delete, KindLeaderWorkerSet, l)
		}
	} else {
		wantL, liveL := want.LeaderWorkerSet, in.Observed.LeaderWorkerSet
		recreate := false
		if liveL != nil && ControlledBy(liveL, isvc) {
			var move queueMove
			if move, recreate = decideLWSQueueMove(isvc, liveL); move.hold {
				wantL = withLWSQueueOf(wantL, liveL)
			}
			queueCause = move.cause
		}
		switch {
		case recreate:
			out.add(Delete, KindLeaderWorkerSet, liveL) // made anew in the new queue next pass
		case liveL == nil:
			out.Actions = append(out.Actions, Action{Verb: Create, Kind: KindLeaderWorkerSet, Object: wantL, Scale: sc})
		case !ControlledBy(liveL, isvc):
			out.conflict(isvc, KindLeaderWorkerSet, liveL)
		case lwsDrifted(liveL, wantL, sc):
			upd := liveL.DeepCopy()
			setLWS(upd, wantL, sc)
			out.Actions = append(out.Actions, Action{Verb: Update, Kind: KindLeaderWorkerSet, Object: upd, Scale: sc})
		}
		if liveL != nil {
			anchor = liveL
		}
		// To multi-node: the Deployment goes as the LeaderWorkerSet comes (both cannot hold
		// the model's GPUs at once on a cluster sized for one).
		if liveD != nil && ControlledBy(liveD, isvc) {
			out.add(Delete, "Deployment", liveD)
		}
	}
	// The Deployment (or the LeaderWorkerSet) anchors every child that acts on it or its pods:
	// the HPA scales it by name, the Service and the PDB select its pods, the ServiceMonitor
	// and the HTTPRoute reach them through the Service. While someone else's holds the name,
	// none of them may exist; while ours is not seen yet, they wait for its create to succeed.
	anchored := anchor == nil || ControlledBy(anchor, isvc)
	wantS, wantH, wantP, wantSM, wantR, wantSO := want.Service, want.HPA, want.PDB, want.ServiceMonitor, want.HTTPRoute, want.ScaledObject
	wantPool := want.Pool
	wantNP, wantPickerNP := want.NetworkPolicy, want.PickerNetworkPolicy
	wantGP := want.GatewayPolicies
	if !anchored {
		wantS, wantH, wantP, wantSM, wantR, wantSO = nil, nil, nil, nil, nil, nil
		wantPool = poolChildren{}
		wantNP, wantPickerNP = nil, nil
		wantGP = gatewayPolicies{}
	}
	// The route goes to the pool only while its picker serves: until then, and whenever it
	// stops, the Service keeps the model reachable (FailClose would answer 503 instead).
	if wantR != nil && wantPool.Pool != nil && pickerServes(in) {
		wantR = withPoolBackend(wantR, isvc.Name)
	}
	if wantR != nil && cnr.plan.Weight > 0 {
		wantR = withCanaryBackend(wantR, isvc.Name, cnr.plan.Weight)
	}
	// While a canary may run, its pods are fenced and scraped as the stable's.
	if canaryRuns := cnr.deployment != nil || in.Observed.CanaryDeployment != nil; canaryRuns {
		if wantNP != nil {
			wantNP = withCanaryPods(wantNP, isvc.Name)
		}
		if wantSM != nil {
			wantSM = withCanaryService(wantSM, isvc.Name)
		}
	}

	if live := in.Observed.Service; decideChild(&out, isvc, "Service", live, wantS, live == nil, wantS == nil) && serviceDrifted(live, wantS) {
		upd := live.DeepCopy()
		setService(upd, wantS)
		out.update("Service", upd, live)
	}
	if live := in.Observed.HPA; decideChild(&out, isvc, "HorizontalPodAutoscaler", live, wantH, live == nil, wantH == nil) && hpaDrifted(live, wantH) {
		upd := live.DeepCopy()
		setHPA(upd, wantH)
		out.update("HorizontalPodAutoscaler", upd, live)
	}
	// Adapters are loaded at run time: an earlier version's adapter ConfigMap, never read by
	// vLLM, is deleted when ours (a namesake someone else controls is left alone).
	// It goes once the Deployment's template no longer mounts it, so no pod of it waits for it.
	if live := in.Observed.ConfigMap; live != nil && ControlledBy(live, isvc) &&
		(liveD == nil || !hasVolumeNamed(liveD.Spec.Template.Spec.Volumes, AdaptersVolume)) {
		out.add(Delete, "ConfigMap", live)
	}
	if live := in.Observed.PDB; decideChild(&out, isvc, "PodDisruptionBudget", live, wantP, live == nil, wantP == nil) && pdbDrifted(live, wantP) {
		upd := live.DeepCopy()
		setPDB(upd, wantP)
		out.update("PodDisruptionBudget", upd, live)
	}
	// Switching to KEDA: its webhook refuses a ScaledObject for a Deployment that an HPA it does
	// not own targets, and a pass's actions run concurrently, so the create waits for a pass
	// that no longer sees our HPA (its delete event brings that pass).
	holdSO := in.Observed.ScaledObject == nil && in.Observed.HPA != nil && ControlledBy(in.Observed.HPA, isvc)
	for _, o := range []struct {
		on         bool
		kind       string
		live, want *unstructured.Unstructured
	}{
		{in.Features.ServiceMonitors, KindServiceMonitor, in.Observed.ServiceMonitor, wantSM},
		{in.Features.HTTPRoutes, KindHTTPRoute, in.Observed.HTTPRoute, wantR},
		{in.Features.ScaledObjects && !holdSO, KindScaledObject, in.Observed.ScaledObject, wantSO},
		{in.Features.NetworkPolicies, KindNetworkPolicy, in.Observed.NetworkPolicy, wantNP},
		{in.Features.NetworkPolicies, KindPickerNetworkPolicy, in.Observed.PickerNetworkPolicy, wantPickerNP},
	} {
		if o.on && decideChild(&out, isvc, o.kind, o.live, o.want, o.live == nil, o.want == nil) && unstructuredDrifted(o.live, o.want) {
			upd := o.live.DeepCopy()
			setUnstructured(upd, o.want)
			out.add(Update, o.kind, upd)
		}
	}
	if anchored {
		cnr.children(&out, &in)
	}
	decidePool(&out, in, wantPool)
	decideGatewayPolicies(&out, in, wantGP)
	decideActivatorGrant(&out, &in, wantR, activated)
	if anchor == nil {
		for i := range out.Actions {
			out.Actions[i].AfterDeployment = actsOnDeployment(out.Actions[i])
		}
	}

	weights := decideWeights(&in)
	weights.gate(&out)
	out.Weights = weights

	plan := planAdapters(in.Ext.Adapters, in.Adapters)
	out.AdapterSteps = plan.steps
	gated := in.Observed.Pods
	if len(in.Observed.CanaryPods) > 0 { // a canary's pods wait for the adapters as the stable's do
		gated = append(slices.Clone(gated), in.Observed.CanaryPods...)
	}
	out.AdapterGates = adapterGates(in.Ext.Adapters, in.Adapters, gated)

	out.Causes = causesOf(in, out.Actions, out.Conflicts)
	if queueCause != nil {
		out.Causes = append(out.Causes, *queueCause)
	}
	for _, p := range out.Predecessors {
		out.Causes = append(out.Causes, Cause{RankConflict, ReasonReplacingPrevious, p})
	}
	out.Causes = append(out.Causes, plan.causes...)
	routeConflict := routeConflictCause(&in)
	if routeConflict != nil {
		out.Causes = append(out.Causes, *routeConflict)
	}
	if weights.cause != nil {
		out.Causes = append(out.Causes, *weights.cause)
	}
	out.Status = WithCauses(observedStatus(in, want.Selector), isvc, out.Causes, in.Now)
	if sleep.asleep {
		sleep.setStatus(&out.Status, isvc, in.Features.Activator, in.Now)
	}
	plan.setCondition(&out.Status, isvc, len(in.Ext.Adapters) > 0, in.Now)
	autoscaler, autoscalingRecheck := decideAutoscaling(isvc, in.Observed.HPA, wantH, in.Observed.Pods, in.Observed.MetricsAPI, in.Now.Time)
	switch {
	case in.Features.ScaledObjects:
		autoscaler = decideScaledObject(isvc, in.Observed.ScaledObject, wantSO)
	case in.Features.KEDAUnserved:
		autoscaler = autoscaler.withKEDAUnserved()
	}
	if n := hold.note(); n != "" && autoscaler.present {
		autoscaler.message = joinMessage(n, autoscaler.message)
	}
	autoscaler.set(&out.Status, isvc, in.Now)
	admitted := decideAdmission(in)
	admitted.set(&out.Status, isvc, in.Now)
	decideRouted(in, wantR, wantPool, activated).withConflict(routeConflict).set(&out.Status, isvc, in.Now)
	out.StatusExt = statusExtensions(in, want.HTTPRoute, activated)
	out.StatusExt.LoadedAdapters = plan.loaded
	out.StatusExt.Cache = weights.status
	withSlowStart(&out.Status, out.StatusExt.LastStart, &in.Ext)
	out.StatusExt.Rollout = in.Observed.StoredRollout
	if cnr.on {
		out.StatusExt.Rollout, out.RolloutChanged = cnr.plan.Status, cnr.plan.Changed
	}
	cnr.setCondition(&out.Status, isvc, in.Now)
	out.Recheck = diagnosisRecheck(in)
	var groupsRecheck time.Duration
	if WantsGroupFailures(in) {
		groupsRecheck = groupFailuresRecheck
	}
	var holdRecheck time.Duration
	if !hold.until.IsZero() {
		holdRecheck = hold.until.Sub(in.Now.Time)
	}
	for _, r := range []time.Duration{autoscalingRecheck, admitted.recheck, groupsRecheck, holdRecheck, sleep.recheck, weights.recheck(), cnr.plan.Recheck} {
		if r > 0 && (out.Recheck <= 0 || r < out.Recheck) {
			out.Recheck = r
		}
	}
	return out
}

// actsOnDeployment names the actions on children that act on the Deployment (or the
// LeaderWorkerSet in its place) or its pods.
func actsOnDeployment(a Action) bool {
	return !IsAnchorKind(a.Kind) && a.Kind != "ConfigMap"
}

// IsAnchorKind reports whether kind is the child that runs the pods: the Deployment, or a
// multi-node model's LeaderWorkerSet.
func IsAnchorKind(kind string) bool { return kind == "Deployment" || kind == KindLeaderWorkerSet }

// decideChild decides a child that exists only for some specs (or only beside our Deployment): create it when wanted and missing,
// report a namesake someone else controls, delete ours when no longer wanted. It returns true
// when both exist and are ours, for the caller to compare. Typed nils come with their flags.
func decideChild(out *Output, isvc *crd.InferenceService, kind string, live, want Child, noLive, noWant bool) bool {
	switch {
	case noLive && !noWant:
		out.add(Create, kind, want)
	case noLive:
	case !ControlledBy(live, isvc):
		if !noWant {
			out.conflict(isvc, kind, live)
		}
	case noWant:
		out.add(Delete, kind, live)
	default:
		return true
	}
	return false
}

// statusExtensions are v1beta1's status additions: the in-cluster endpoint and the model name
// once the Service is ours, and the gateway path once our HTTPRoute is accepted.
func statusExtensions(in Input, wantRoute *unstructured.Unstructured, activated bool) crd.StatusExtensions {
	ext := crd.StatusExtensions{LastStart: lastStartOf(in)}
	isvc := in.ISVC
	if s := in.Observed.Service; s != nil && ControlledBy(s, isvc) {
		ext.Endpoint = "http://" + isvc.Name + "." + isvc.Namespace + ".svc:" + portString
		if activated { // the Service has no pod at zero: in-cluster clients go through the activator
			ext.Endpoint = activatorURL(isvc, in.Features.Activator, in.Features.ActivatorPort)
		}
		ext.LastColdStart = coldStartOf(s)
		ext.ModelName = ModelName(&isvc.Spec)
	}
	if r := in.Observed.HTTPRoute; in.Features.HTTPRoutes && wantRoute != nil && r != nil && ControlledBy(r, isvc) &&
		routeAccepted(r, in.Features.GatewayParent) {
		ext.RoutePath = RouteOf(isvc, &in.Ext).Path
	}
	return ext
}

// ControlledBy checks the controller reference by UID, so a same-named child of a deleted and
// recreated InferenceService is not mistaken for this one's.
func ControlledBy(obj metav1.Object, isvc *crd.InferenceService) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == isvc.UID
}

// portString is Port formatted once, not per reconcile.
var portString = strconv.Itoa(Port)

// IsOurGroup reports whether apiVersion is in the InferenceService's API group.
func IsOurGroup(apiVersion string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == crd.Group
}
