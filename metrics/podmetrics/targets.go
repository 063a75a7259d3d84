package podmetrics

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pod vocabulary the operator writes (informers/kinds/labels.go, controller/reconcile/children.go);
// the operator's packages are not imported so that this binary links none of them.
const (
	ManagedBySelector = "app.kubernetes.io/managed-by=inferenceservice-operator"
	InstanceLabel     = "ai.example.com/inferenceservice"
	containerName     = "vllm"
	portName          = "http"
)

// Target is one model pod to read, by address: pod IPs, never names, so nothing is resolved.
type Target struct {
	Namespace, Name string
	// Model is the InferenceService the pod serves (its InstanceLabel).
	Model string
	URL   string
}

// TargetOf is the pod's /metrics address when it should be read: ready, not terminating, with
// an IP and the model server's port. A pod that is not ready is left out, as the HPA leaves
// it out, rather than read as an empty queue.
func TargetOf(pod *corev1.Pod) (Target, bool) {
	if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" || !podReady(pod) {
		return Target{}, false
	}
	port, ok := serverPort(pod)
	if !ok {
		return Target{}, false
	}
	return Target{
		Namespace: pod.Namespace,
		Name:      pod.Name,
		Model:     pod.Labels[InstanceLabel],
		URL:       "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))) + "/metrics",
	}, true
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// serverPort is the vllm container's named port, the one its probes and Service use.
func serverPort(pod *corev1.Pod) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		if c.Name != containerName {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == portName {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// StripPod is the informer's transform: a model pod as far as TargetOf, ServedBy and label
// selectors read it, so the cache holds a few hundred bytes per pod instead of its whole spec.
func StripPod(obj interface{}) (interface{}, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone: the informer passes it through
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            pod.Labels,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{PodIP: pod.Status.PodIP},
	}
	// The controller reference only: ServedBy walks it (a leader pod is a worker's owner).
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	if port, ok := serverPort(pod); ok {
		out.Spec.Containers = []corev1.Container{{
			Name:  containerName,
			Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: port}},
		}}
	}
	return out, nil
}
