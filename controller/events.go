package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// shedding drops Normal Events while busy() says the API budget is contended: they only
// report what status and the children already show, and each costs a write that would queue
// behind the creates and updates that make models run. Warnings always go out.
type shedding struct {
	events.EventRecorder
	busy func() bool
}

func (s shedding) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if eventtype == corev1.EventTypeNormal && s.busy() {
		klog.V(4).InfoS("Normal Event skipped: API budget contended", "reason", reason, "action", action)
		return
	}
	s.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
