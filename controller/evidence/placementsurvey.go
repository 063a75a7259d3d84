// The nodes' taints and labels, read only for a model the scheduler keeps off nodes for a taint
// or a selector (reconcile.WantsPlacementSurvey), so the diagnosis can name the taint and the
// label: the node cache keeps neither (informers' StripNode, for memory), and kube-scheduler
// v1.37's message names neither. One list of the nodes from the API server's watch cache
// serves every model for placementSurveyPeriod.

package evidence

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

const (
	placementSurveyPeriod  = time.Minute
	placementSurveyTimeout = 10 * time.Second
)

// placementSurvey returns the nodes' taints that keep pods off and their labels when the model
// wants them; nil otherwise, or when the nodes cannot be listed (the namespaced install).
func (r *Reader) placementSurvey(ctx context.Context, in reconcile.Input) []reconcile.NodePlacement {
	if !reconcile.WantsPlacementSurvey(in) {
		return nil
	}
	r.placementMu.Lock()
	defer r.placementMu.Unlock() // one list at a time: the other workers wait for it
	if s, ok := r.placement.fresh(struct{}{}, in.Now.Time, placementSurveyPeriod); ok {
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, placementSurveyTimeout)
	defer cancel()
	list, err := r.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		klog.V(2).InfoS("nodes not listed; an untolerated taint or unmatched selector is reported without its name", "err", err)
		r.placement.put(struct{}{}, in.Now.Time, nil)
		return nil
	}
	out := make([]reconcile.NodePlacement, 0, len(list.Items))
	for i := range list.Items {
		n := &list.Items[i]
		np := reconcile.NodePlacement{Name: n.Name, Labels: n.Labels}
		for _, t := range n.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				np.Taints = append(np.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
			}
		}
		out = append(out, np)
	}
	r.placement.put(struct{}{}, in.Now.Time, out)
	return out
}
