// The child that runs the model's pods, as the layer diagnosis and the status read it: the
// Deployment, or a LeaderWorkerSet whose groups are seen as a Deployment's replicas.

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// runningView is the child that runs the model's pods, as the layer diagnosis reads it: our
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

// kindOf names the diagnosis's top layer in messages: a Deployment, or a LeaderWorkerSet seen
// through groupView.
func kindOf(d *appsv1.Deployment) string {
	if d.Kind == KindLeaderWorkerSet {
		return KindLeaderWorkerSet
	}
	return "Deployment"
}

// groupView is a multi-node model's LeaderWorkerSet seen as the layer diagnosis sees a
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

// GroupView is groupView for readers outside the operator (the kubectl plugin's
// troubleshooting walk): the
// view carries the LeaderWorkerSet's owner references, so it is the isvc's as the LWS is.
func GroupView(lws *unstructured.Unstructured, pods []*corev1.Pod) (*appsv1.Deployment, []*appsv1.ReplicaSet) {
	d, rss := groupView(lws, pods, nil)
	d.OwnerReferences = lws.GetOwnerReferences()
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

// Unobserved reports a running workload whose latest generation its own controller has not
// observed yet (an HPA's scale or a drift fix, moments ago): its status is still the previous
// generation's, and whether anything rolls out is known only once that controller looks.
func Unobserved(in Input) bool {
	d, _, ok := runningView(&in)
	return ok && d.Status.ObservedGeneration < d.Generation
}
