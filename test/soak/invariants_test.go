package soak

// The invariants, checked against the API server: what exists against the workload's model,
// each isvc's children and their owner, no orphan, and each status against its Deployment.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// maxViolations bounds the list a failed check reports.
const maxViolations = 20

// check compares the cluster with the world's expected models and returns the violations
// (nil when every invariant holds), and with the gateway's routes when gw is not nil. An error
// is a failure to read, not a violation.
func check(ctx context.Context, expected []model, nsList []string, gw *gatewayView) ([]string, error) {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	want := map[string]model{}
	for _, m := range expected {
		want[m.key()] = m
	}
	isvcs := map[string]*crd.InferenceService{}
	uids := map[types.UID]bool{}
	deps := map[string]*appsv1.Deployment{}
	hpas := map[string]*autoscalingv2.HorizontalPodAutoscaler{}
	type child struct {
		kind, key string
		meta      metav1.Object
	}
	var children []child
	for _, ns := range nsList {
		l, err := env.Dyn.Resource(crd.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			isvc, err := crd.FromUnstructured(&l.Items[i])
			if err != nil {
				return nil, err
			}
			key := ns + "/" + isvc.Name
			if _, dup := isvcs[key]; dup {
				add("%s listed twice", key)
			}
			isvcs[key] = isvc
			uids[isvc.UID] = true
		}
		sel := metav1.ListOptions{LabelSelector: kinds.ManagedByLabel + "=" + kinds.ManagedByValue}
		dl, err := env.Kube.AppsV1().Deployments(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		for i := range dl.Items {
			d := &dl.Items[i]
			deps[ns+"/"+d.Name] = d
			children = append(children, child{"Deployment", ns + "/" + d.Name, d})
		}
		sl, err := env.Kube.CoreV1().Services(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		for i := range sl.Items {
			children = append(children, child{"Service", ns + "/" + sl.Items[i].Name, &sl.Items[i]})
		}
		hl, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		for i := range hl.Items {
			hpas[ns+"/"+hl.Items[i].Name] = &hl.Items[i]
			children = append(children, child{"HorizontalPodAutoscaler", ns + "/" + hl.Items[i].Name, &hl.Items[i]})
		}
	}
	// Nothing lost, nothing extra (an extra one still being deleted is not there yet).
	for key := range want {
		if _, ok := isvcs[key]; !ok {
			add("%s lost: the workload made it, the API server has none", key)
		}
	}
	for key, isvc := range isvcs {
		if _, ok := want[key]; !ok {
			add("%s exists (deleting: %v) but the workload deleted it", key, isvc.DeletionTimestamp != nil)
		}
	}
	// Every child controlled by a live isvc of its name; none left for a deleted one.
	has := map[string]bool{}
	for _, c := range children {
		ref := metav1.GetControllerOf(c.meta)
		switch {
		case ref == nil:
			add("%s %s has no controller", c.kind, c.key)
		case !uids[ref.UID]:
			add("%s %s orphaned: its controller %s (uid %s) is gone", c.kind, c.key, ref.Name, ref.UID)
		case isvcs[c.key] == nil || isvcs[c.key].UID != ref.UID:
			add("%s %s controlled by %s, not by the isvc of its name", c.kind, c.key, ref.Name)
		default:
			has[c.kind+" "+c.key] = true
		}
	}
	for key, m := range want {
		isvc := isvcs[key]
		if isvc == nil {
			continue
		}
		if int64(isvc.Spec.Replicas) != m.replicas || isvc.Spec.Image != images[m.image] {
			add("%s spec replicas=%d image=%s, the workload wrote replicas=%d image=%s", key, isvc.Spec.Replicas, isvc.Spec.Image, m.replicas, images[m.image])
		}
		kindsWanted := []string{"Deployment", "Service"}
		if m.replicas > 0 {
			kindsWanted = append(kindsWanted, "HorizontalPodAutoscaler")
		}
		for _, k := range kindsWanted {
			if !has[k+" "+key] {
				add("%s has no %s of its own", key, k)
			}
		}
		d := deps[key]
		if d == nil {
			continue
		}
		st := isvc.Status
		// The count is the HPA's between the bounds spec.replicas gives it (the seed's: half to
		// three times); the operator applied the user's count (its record on the Deployment) and
		// the bounds (the HPA's). Zero replicas: no HPA, no pods.
		r, n := int32(m.replicas), ptr.Deref(d.Spec.Replicas, 1)
		lo, hi := max(1, r/2), 3*r
		h := hpas[key]
		switch {
		case st.ObservedGeneration != isvc.Generation:
			add("%s status for generation %d, object at %d", key, st.ObservedGeneration, isvc.Generation)
		case modelImage(d) != isvc.Spec.Image:
			add("%s Deployment runs image %q, spec %q", key, modelImage(d), isvc.Spec.Image)
		case d.Annotations[reconcile.ReplicasAnnotation] != strconv.Itoa(int(r)):
			add("%s Deployment records replicas %q applied, spec %d", key, d.Annotations[reconcile.ReplicasAnnotation], r)
		case r == 0 && n != 0:
			add("%s Deployment replicas %d, spec 0", key, n)
		case r > 0 && (n < heldMin(d, lo) || n > hi):
			add("%s Deployment replicas %d, outside the HPA's bounds %d..%d for spec %d", key, n, lo, hi, r)
		case r > 0 && h != nil && (ptr.Deref(h.Spec.MinReplicas, 1) != heldMin(d, lo) || h.Spec.MaxReplicas != hi):
			add("%s HPA bounds %d..%d, spec %d wants %d..%d", key, ptr.Deref(h.Spec.MinReplicas, 1), h.Spec.MaxReplicas, r, heldMin(d, lo), hi)
		case d.Status.ReadyReplicas != n || d.Status.UpdatedReplicas != n || d.Status.Replicas != n:
			add("%s Deployment not rolled out: %d ready, %d updated, %d total of %d", key, d.Status.ReadyReplicas, d.Status.UpdatedReplicas, d.Status.Replicas, n)
		case st.ReadyReplicas != d.Status.ReadyReplicas:
			add("%s status readyReplicas %d, Deployment %d", key, st.ReadyReplicas, d.Status.ReadyReplicas)
		case m.replicas > 0 && st.Phase != crd.PhaseReady:
			add("%s phase %s (%s) with every replica ready", key, st.Phase, st.Reason)
		}
	}
	if gw != nil {
		v = append(v, checkRoutes(want, isvcs, gw)...)
	}
	sort.Strings(v)
	return v, nil
}

// checkRoutes: every model has its route on the gateway, to its Service, and says so in its
// status for its generation; no route outlives its isvc but where the operator may leave it.
func checkRoutes(want map[string]model, isvcs map[string]*crd.InferenceService, gw *gatewayView) []string {
	var v []string
	for key := range want {
		isvc := isvcs[key]
		if isvc == nil {
			continue
		}
		r, ok := gw.routes[key]
		switch c := meta.FindStatusCondition(isvc.Status.Conditions, crd.ConditionGatewayRegistered); {
		case !ok:
			v = append(v, fmt.Sprintf("%s has no route on the gateway", key))
		case r.Service != isvc.Name || r.Port != reconcile.Port:
			v = append(v, fmt.Sprintf("%s route leads to %s:%d, not its Service %s:%d", key, r.Service, r.Port, isvc.Name, reconcile.Port))
		case c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != isvc.Generation:
			v = append(v, fmt.Sprintf("%s route registered, status %s for generation %d", key, condString(c), isvc.Generation))
		}
	}
	for key := range gw.routes {
		ns, _, _ := strings.Cut(key, "/")
		if _, ok := isvcs[key]; !ok && !gw.mayBeLeft[ns] {
			v = append(v, fmt.Sprintf("route %s left on the gateway: its isvc is gone", key))
		}
	}
	return v
}

func condString(c *metav1.Condition) string {
	if c == nil {
		return "without GatewayRegistered"
	}
	return fmt.Sprintf("GatewayRegistered=%s (%s) at generation %d", c.Status, c.Reason, c.ObservedGeneration)
}

// heldMin is the HPA's minimum: lo, or the raised count while a raise of spec.replicas is held
// (the Deployment's raised-to record, until the new pods have served for the HPA's window).
func heldMin(d *appsv1.Deployment, lo int32) int32 {
	if n, err := strconv.Atoi(d.Annotations[reconcile.RaisedAnnotation]); err == nil && int32(n) > lo {
		return int32(n)
	}
	return lo
}

// modelImage is the image of the Deployment's model server container.
func modelImage(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == kinds.ContainerName {
			return c.Image
		}
	}
	return ""
}

// summary is the first violations, one a line, and how many there were.
func summary(v []string) string {
	if len(v) > maxViolations {
		return fmt.Sprintf("%s\n... and %d more", strings.Join(v[:maxViolations], "\n"), len(v)-maxViolations)
	}
	return strings.Join(v, "\n")
}
