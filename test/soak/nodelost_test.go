package soak

// The node-lost fault: one node's kubelet cut from the control plane (the local cluster's
// kubelet.fake/partitioned), long enough for the node lifecycle controller to mark it NotReady
// and evict its pods, then the link back.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The soak's cluster: a silent node is NotReady after nodeGrace and its pods tolerate that for
// evictAfter (the defaults, 50 s and 5 min, would hold every run for minutes).
const (
	nodeGrace  = 30 * time.Second
	evictAfter = 30 * time.Second
)

// nodeLostHold is how long the node stays cut: past the grace and the toleration, so its
// pods are evicted and replaced while it is away, plus the schedule's jitter.
func nodeLostHold(hold time.Duration) time.Duration {
	return nodeGrace + evictAfter + 15*time.Second + hold
}

// nodeLost cuts the node with the most pods of the soak for hold, watching what the node
// controller does meanwhile, and returns once the node is Ready again.
func (s *soakRun) nodeLost(ctx context.Context, hold time.Duration) (string, error) {
	node, pods, err := nodeWithMost(ctx, func(*corev1.Pod) bool { return true })
	if err != nil {
		return "", err
	}
	if err := annotateNode(ctx, node, "kubelet.fake/partitioned", "true"); err != nil {
		return "", err
	}
	cut := time.Now()
	var notReady time.Duration
	evicted := 0
	for time.Since(cut) < hold && ctx.Err() == nil { // the schedule's length, watched as it passes
		if notReady == 0 && nodeReady(ctx, node) == corev1.ConditionUnknown {
			notReady = time.Since(cut)
		}
		evicted = max(evicted, terminatingOn(ctx, node))
		time.Sleep(time.Second) // poll interval
	}
	if err := annotateNode(ctx, node, "kubelet.fake/partitioned", ""); err != nil {
		return "", err
	}
	back := time.Now()
	if err := retry(ctx, 2*time.Minute, func() error {
		if st := nodeReady(ctx, node); st != corev1.ConditionTrue {
			return fmt.Errorf("node %s Ready %q after the link came back", node, st)
		}
		return nil
	}); err != nil {
		return "", err
	}
	seen := "never seen NotReady"
	if notReady > 0 {
		seen = fmt.Sprintf("NotReady after %.0fs", notReady.Seconds())
	}
	return fmt.Sprintf("%s (%d pods) cut from the control plane for %s: %s, %d of its pods evicted; Ready again %.1fs after the link came back",
		node, pods, hold, seen, evicted, time.Since(back).Seconds()), nil
}

// nodeWithMost is the node running the most pods that match (ties: the first by name).
func nodeWithMost(ctx context.Context, match func(*corev1.Pod) bool) (string, int, error) {
	l, err := env.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", 0, err
	}
	count := map[string]int{}
	for i := range l.Items {
		if p := &l.Items[i]; p.Spec.NodeName != "" && match(p) {
			count[p.Spec.NodeName]++
		}
	}
	best, n := "", 0
	for node, c := range count {
		if c > n || c == n && node < best {
			best, n = node, c
		}
	}
	if best == "" {
		return "", 0, fmt.Errorf("no such pod runs on any node")
	}
	return best, n, nil
}

// annotateNode sets the node's annotation key to value ("" removes it), retried while the API
// server restarts.
func annotateNode(ctx context.Context, node, key, value string) error {
	v := "null"
	if value != "" {
		v = strconv.Quote(value)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, v)
	return retry(ctx, time.Minute, func() error {
		_, err := env.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
}

// nodeReady is the node's Ready condition ("" when it cannot be read).
func nodeReady(ctx context.Context, name string) corev1.ConditionStatus {
	n, err := env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// terminatingOn counts the node's pods being deleted.
func terminatingOn(ctx context.Context, node string) int {
	l, err := env.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil {
			n++
		}
	}
	return n
}
