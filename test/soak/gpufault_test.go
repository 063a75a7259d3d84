package soak

// The GPU fault: an uncorrectable ECC error on one node's GPUs (the local cluster's
// kubelet.fake/gpu-fault): its GPU-holding model servers die and fail every restart, and its
// allocatable GPUs drop to 0, until the fault is cleared.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// gpuFaultHold is how long the GPUs stay sick: long enough for a crash loop and the operator's
// diagnosis, plus the schedule's jitter.
func gpuFaultHold(hold time.Duration) time.Duration { return 20*time.Second + hold }

// gpuFault makes the node running the most GPU-holding pods sick for hold, then heals it.
func (s *soakRun) gpuFault(ctx context.Context, hold time.Duration) (string, error) {
	node, pods, err := nodeWithMost(ctx, holdsGPU)
	if err != nil {
		return "", err
	}
	if err := annotateNode(ctx, node, "kubelet.fake/gpu-fault", "ecc"); err != nil {
		return "", err
	}
	timer := time.NewTimer(hold) // the schedule's length, not a wait for state
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	if err := annotateNode(ctx, node, "kubelet.fake/gpu-fault", ""); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s's GPUs failed (uncorrectable ECC) for %s under %d GPU pods, then healed", node, hold, pods), nil
}

// holdsGPU: a container of the pod holds a GPU.
func holdsGPU(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits["nvidia.com/gpu"]; ok && !q.IsZero() {
			return true
		}
	}
	return false
}
