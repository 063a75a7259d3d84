package main

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The baseline's children are the operator's, probes included, owned by nothing: a baseline
// without probes turns ready sooner for reasons that are not the operator's.
func TestBaselineCreatesTheOperatorsChildren(t *testing.T) {
	var d *appsv1.Deployment
	kinds := map[string]bool{}
	for _, o := range sameChildren(7, false) {
		m := o.(metav1.Object)
		if m.GetNamespace() != "baseline" || m.GetName() != "m-00007" || len(m.GetOwnerReferences()) != 0 {
			t.Errorf("%T %s/%s owners %v", o, m.GetNamespace(), m.GetName(), m.GetOwnerReferences())
		}
		switch o := o.(type) {
		case *appsv1.Deployment:
			d, kinds["Deployment"] = o, true
		case *corev1.Service:
			kinds["Service"] = true
		case *autoscalingv2.HorizontalPodAutoscaler:
			kinds["HPA"] = true
		}
	}
	if len(kinds) != 3 || d == nil {
		t.Fatalf("children %v", kinds)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.StartupProbe == nil {
		t.Errorf("the operator's probes missing: readiness %v startup %v", c.ReadinessProbe, c.StartupProbe)
	}
}
