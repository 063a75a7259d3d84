// How many pods a model runs: the scale the spec asks for, and the count applied to the
// running child without fighting the HPA.

package reconcile

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// Scale is how many pods a model runs: Replicas at first and, when Fixed, whenever the user
// changes it; otherwise whatever the HPA picks between Min and Max.
type Scale struct {
	Replicas, Min, Max int32
	// Fixed: spec.replicas is the user's count (v1alpha1, or v1beta1 replicas); false for
	// v1beta1 autoscaling, where a change of the bounds must not reset the HPA's choice.
	Fixed bool
}

// scaleOf reads the scale from v1beta1's autoscaling bounds, else derives it from replicas as
// the seed does.
func scaleOf(isvc *crd.InferenceService, ext *crd.SpecExtensions) Scale {
	if a := ext.Autoscaling; a != nil {
		return Scale{Replicas: isvc.Spec.Replicas, Min: a.MinReplicas, Max: a.MaxReplicas}
	}
	lo, hi := hpaBounds(isvc.Spec.Replicas)
	return Scale{Replicas: isvc.Spec.Replicas, Min: lo, Max: hi, Fixed: true}
}

// hpaBounds are the seed's autoscaling bounds: min max(1, r/2), max 3r.
func hpaBounds(replicas int32) (minReplicas, maxReplicas int32) {
	return max(1, replicas/2), replicas * 3
}

// wantedReplicas decides the Deployment's replica count without fighting the HPA. A change of
// spec.replicas moves the HPA's bounds; the count the HPA chose is kept, clamped into them,
// since each pod it drops is a loaded model server. The user's count applies when the HPA has
// not moved the count away from the last one applied (the annotation records it), and a raise
// is also a floor: asking for more never gets fewer. Otherwise the spec's count is applied only
// to a live count outside the bounds (someone scaled it by hand).
//
// Under v1beta1 autoscaling there is no user's count: a change of the bounds only moves the
// count back inside them.
func wantedReplicas(live *appsv1.Deployment, sc Scale) (int32, bool) {
	return wantedCount(ptr.Deref(live.Spec.Replicas, 1), live.Annotations[ReplicasAnnotation], sc)
}

// wantedCount is wantedReplicas for any scalable child: cur its live count, applied its
// ReplicasAnnotation.
func wantedCount(cur int32, appliedAnnotation string, sc Scale) (int32, bool) {
	want := cur
	switch applied, err := strconv.Atoi(appliedAnnotation); {
	case sc.Fixed && (err != nil || int32(applied) != sc.Replicas):
		if err == nil && int32(applied) == cur {
			want = sc.Replicas // the HPA has not taken over: the user's count
		} else {
			want = min(max(cur, sc.Replicas), sc.Max) // the HPA's, raised to the user's
		}
	case sc.Fixed && (cur < sc.Min || cur > sc.Max):
		want = sc.Replicas
	default:
		want = min(max(cur, sc.Min), sc.Max)
	}
	return want, want != cur
}

// holdForHPAMin keeps the Deployment's count this pass when lowering it would go below the
// minimum our live HPA still holds: the HPA controller scales from its own cache of the HPA,
// and a count below a minimum it still sees is raised straight back ("Current number of
// replicas below Spec.MinReplicas"), after which the HPA owns the count and the user's scale-
// down is lost (seen in the soak's conflict storm). The HPA's update, in this pass, brings the
// pass that lowers the count; until then the Deployment keeps its count and its record of the
// last count applied.
func holdForHPAMin(liveD, wantD *appsv1.Deployment, liveH *autoscalingv2.HorizontalPodAutoscaler, ours bool, sc Scale) (*appsv1.Deployment, Scale) {
	if liveD == nil || wantD == nil || liveH == nil || !ours {
		return wantD, sc
	}
	n, change := wantedReplicas(liveD, sc)
	if !change || n >= ptr.Deref(liveD.Spec.Replicas, 1) || ptr.Deref(liveH.Spec.MinReplicas, 1) <= n {
		return wantD, sc
	}
	applied, err := strconv.Atoi(liveD.Annotations[ReplicasAnnotation])
	if err != nil {
		return wantD, sc
	}
	held := wantD.DeepCopy()
	held.Annotations[ReplicasAnnotation] = liveD.Annotations[ReplicasAnnotation]
	sc.Replicas = int32(applied)
	return held, sc
}
