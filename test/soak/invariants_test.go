package soak

// The invariants, checked against the API server: what exists against the workload's model,
// each isvc's children and their owner, no orphan, and each status against its Deployment.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// maxViolations bounds the list a failed check reports.
const maxViolations = 20

// check compares the cluster with the world's expected models and returns the violations
// (nil when every invariant holds). An error is a failure to read, not a violation.
func check(ctx context.Context, expected []model, nsList []string) ([]string, error) {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	want := map[string]model{}
	for _, m := range expected {
		want[m.key()] = m
	}
	isvcs := map[string]*crd.InferenceService{}
	uids := map[types.UID]bool{}
	deps := map[string]*appsv1.Deployment{}
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
		switch {
		case st.ObservedGeneration != isvc.Generation:
			add("%s status for generation %d, object at %d", key, st.ObservedGeneration, isvc.Generation)
		case ptr.Deref(d.Spec.Replicas, 1) != int32(m.replicas):
			add("%s Deployment replicas %d, spec %d", key, ptr.Deref(d.Spec.Replicas, 1), m.replicas)
		case d.Status.ReadyReplicas != int32(m.replicas) || d.Status.UpdatedReplicas != int32(m.replicas) || d.Status.Replicas != int32(m.replicas):
			add("%s Deployment not rolled out: %d ready, %d updated, %d total of %d", key, d.Status.ReadyReplicas, d.Status.UpdatedReplicas, d.Status.Replicas, m.replicas)
		case st.ReadyReplicas != d.Status.ReadyReplicas:
			add("%s status readyReplicas %d, Deployment %d", key, st.ReadyReplicas, d.Status.ReadyReplicas)
		case m.replicas > 0 && st.Phase != crd.PhaseReady:
			add("%s phase %s (%s) with every replica ready", key, st.Phase, st.Reason)
		}
	}
	sort.Strings(v)
	return v, nil
}

// summary is the first violations, one a line, and how many there were.
func summary(v []string) string {
	if len(v) > maxViolations {
		return fmt.Sprintf("%s\n... and %d more", strings.Join(v[:maxViolations], "\n"), len(v)-maxViolations)
	}
	return strings.Join(v, "\n")
}
