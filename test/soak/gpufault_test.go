package soak

// The GPU fault: an uncorrectable ECC error on one node's GPUs (the local cluster's
// kubelet.fake/gpu-fault): its GPU-holding model servers die and fail every restart, and its
// allocatable GPUs drop to 0, until the fault is cleared.

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// gpuFaultHold is how long the GPUs stay sick: long enough for a crash loop and the operator's
// diagnosis, plus the schedule's jitter.
func gpuFaultHold(hold time.Duration) time.Duration { return 20*time.Second + hold }

// gpuFault makes the node running the most GPU-holding pods sick for hold, then heals it.
func (s *soakRun) gpuFault(ctx context.Context, hold time.Duration) (string, error) {
	node, pods, err := gpuNode(ctx)
	if err != nil {
		return "", err
	}
	set := func(v string) error {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"kubelet.fake/gpu-fault":%s}}}`, v)
		return retry(ctx, time.Minute, func() error {
			_, err := env.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		})
	}
	if err := set(`"ecc"`); err != nil {
		return "", err
	}
	timer := time.NewTimer(hold) // the schedule's length, not a wait for state
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	if err := set("null"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s's GPUs failed (uncorrectable ECC) for %s under %d GPU pods, then healed", node, hold, pods), nil
}

// gpuNode is the node with the most pods holding GPUs.
func gpuNode(ctx context.Context) (string, int, error) {
	l, err := env.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", 0, err
	}
	count := map[string]int{}
	for _, p := range l.Items {
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Limits["nvidia.com/gpu"]; ok && !q.IsZero() && p.Spec.NodeName != "" {
				count[p.Spec.NodeName]++
				break
			}
		}
	}
	best, n := "", 0
	for node, c := range count {
		if c > n || c == n && node < best {
			best, n = node, c
		}
	}
	if best == "" {
		return "", 0, fmt.Errorf("no pod holding a GPU runs on any node")
	}
	return best, n, nil
}
