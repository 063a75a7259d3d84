// The cluster's GPUs per node, read only for a model the scheduler finds short of GPUs
// (reconcile.WantsGPUSurvey), to tell a fragmented cluster from a full one: the nodes come from
// the node cache, the GPUs in use from one list of the cluster's bound, unfinished pods served
// from the API server's watch cache. One survey serves every model for gpuSurveyPeriod, so a
// thousand models short of GPUs cost one list a minute.

package evidence

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

const (
	gpuSurveyPeriod  = time.Minute
	gpuSurveyTimeout = 10 * time.Second
	// boundUnfinished are the pods that hold their node's GPUs.
	boundUnfinished = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
)

// gpuUse is a survey: GPUs in use per node and resource, or failed (a refused list: the
// namespaced install cannot list pods cluster-wide).
type gpuUse struct {
	inUse  map[string]map[corev1.ResourceName]int64
	failed bool
}

// gpuSurvey returns the schedulable nodes' GPUs of the model's resource when the model is
// short of GPUs and nodes are watched; nil otherwise, or when the pods cannot be listed.
func (r *Reader) gpuSurvey(ctx context.Context, in reconcile.Input) []reconcile.NodeGPUs {
	if !reconcile.WantsGPUSurvey(in) {
		return nil
	}
	nodes := r.nodes.Nodes()
	if nodes == nil {
		return nil
	}
	inUse, ok := r.gpusInUse(ctx, in.Now.Time)
	if !ok {
		return nil
	}
	res := in.ISVC.Spec.GPUResourceName()
	var out []reconcile.NodeGPUs
	for _, n := range nodes {
		q, has := n.Status.Allocatable[res]
		if !has || !kinds.Schedulable(n) {
			continue
		}
		out = append(out, reconcile.NodeGPUs{Node: n.Name, Allocatable: q.Value(), InUse: inUse[n.Name][res]})
	}
	return out
}

// gpusInUse is the survey's GPUs in use per node, taken again once it is gpuSurveyPeriod old.
func (r *Reader) gpusInUse(ctx context.Context, now time.Time) (map[string]map[corev1.ResourceName]int64, bool) {
	r.surveyMu.Lock()
	defer r.surveyMu.Unlock() // one survey at a time: the other workers wait for it, not repeat it
	if s, ok := r.survey.fresh(struct{}{}, now, gpuSurveyPeriod); ok {
		return s.inUse, !s.failed
	}
	ctx, cancel := context.WithTimeout(ctx, gpuSurveyTimeout)
	defer cancel()
	list, err := r.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: boundUnfinished, ResourceVersion: "0"})
	if err != nil {
		klog.V(2).InfoS("GPUs in use not surveyed; a model short of GPUs is reported InsufficientGPU", "err", err)
		r.survey.put(struct{}{}, now, gpuUse{failed: true})
		return nil, false
	}
	inUse := map[string]map[corev1.ResourceName]int64{}
	for i := range list.Items {
		p := &list.Items[i]
		for res, q := range podRequests(p) {
			if inUse[p.Spec.NodeName] == nil {
				inUse[p.Spec.NodeName] = map[corev1.ResourceName]int64{}
			}
			inUse[p.Spec.NodeName][res] += q
		}
	}
	r.survey.put(struct{}{}, now, gpuUse{inUse: inUse})
	return inUse, true
}

// podRequests is a pod's effective request of each extended resource the way the scheduler
// counts it: the sum over its containers, or its largest init container's if that is more.
func podRequests(p *corev1.Pod) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for _, c := range p.Spec.Containers {
		for r, q := range c.Resources.Requests {
			out[r] += q.Value()
		}
	}
	for _, c := range p.Spec.InitContainers {
		for r, q := range c.Resources.Requests {
			out[r] = max(out[r], q.Value())
		}
	}
	for r := range out {
		if r == corev1.ResourceCPU || r == corev1.ResourceMemory || r == corev1.ResourceEphemeralStorage || r == corev1.ResourcePods {
			delete(out, r)
		}
	}
	return out
}
