// The model's Service: desired, drift and set.

package reconcile

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// leaderSelector is a multi-node model's Service selector: only a group's leader serves the API.
func leaderSelector(name string) map[string]string {
	return map[string]string{kinds.InstanceLabel: name, kinds.LWSWorkerLabel: "0"}
}

func desiredService(b shared, multiNode bool) *corev1.Service {
	sel := b.selector
	if multiNode {
		sel = leaderSelector(b.meta.Name)
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: b.meta,
		Spec: corev1.ServiceSpec{
			Selector: sel,
			Ports: []corev1.ServicePort{{
				Name: PortName, Port: Port, TargetPort: intstr.FromString(PortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

func isHTTPPort(p corev1.ServicePort) bool { return p.Name == PortName }

func serviceDrifted(live, want *corev1.Service) bool {
	if !hasLabels(live.Labels, want.Labels) || !maps.Equal(live.Spec.Selector, want.Spec.Selector) {
		return true
	}
	i := slices.IndexFunc(live.Spec.Ports, isHTTPPort)
	if i < 0 {
		return true
	}
	h, w := live.Spec.Ports[i], want.Spec.Ports[0]
	return h.Port != w.Port || h.TargetPort != w.TargetPort || h.Protocol != w.Protocol
}

func setService(out, want *corev1.Service) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Spec.Selector = maps.Clone(want.Spec.Selector)
	w := want.Spec.Ports[0]
	if i := slices.IndexFunc(out.Spec.Ports, isHTTPPort); i < 0 {
		out.Spec.Ports = append(out.Spec.Ports, w)
	} else {
		p := &out.Spec.Ports[i]
		p.Port, p.TargetPort, p.Protocol = w.Port, w.TargetPort, w.Protocol
	}
}
