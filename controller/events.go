package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// Event reasons for what the operator does to children.
const (
	EventCreated      = "Created"
	EventUpdated      = "Updated"
	EventDeleted      = "Deleted"
	EventFailed       = "Failed"
	EventReconciled   = "Reconciled"
	EventDeregistered = "Deregistered"
	EventRegistered   = "Registered"
	// EventRouteAbandoned: the finalizer was released although deregistration failed.
	EventRouteAbandoned = "RouteAbandoned"
	// EventAutoscalingInactive: the HPA cannot scale the model on its queue (AutoscalingActive
	// turned False); one per transition.
	EventAutoscalingInactive = "AutoscalingInactive"
	// EventSlowStart: a pod's start took longer than reconcile.SlowStartAfter; one per start,
	// naming its slowest phase.
	EventSlowStart = "SlowStart"
)

// sheddingRecorder drops (sheds) Normal Events while the request budget is contended: they only
// report what status and the children already show, and each costs a write that would queue
// behind the creates and updates that make models run. Warnings always go out.
type sheddingRecorder struct {
	events.EventRecorder
	contended func() bool
}

func (s sheddingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if eventtype == corev1.EventTypeNormal && s.contended() {
		klog.V(4).InfoS("Normal Event shed: request budget contended", "reason", reason, "action", action)
		return
	}
	s.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
