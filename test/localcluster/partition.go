// A node cut from the control plane: the node annotation kubelet.fake/partitioned. While it is
// set, the node's kubelet reaches no API server: no Lease renewal, no node status, no pod status,
// and no pod update reaches it (a deletion stays unfinished). Its containers keep running, as
// they do on a real node behind a broken link. The node lifecycle controller then does what it
// does on a real cluster: Ready turns Unknown after --node-monitor-grace-period, the node is
// tainted unreachable, its pods are marked not ready and, once their toleration runs out
// (--pod-eviction-seconds), deleted. Removing the annotation is the link coming back: the
// kubelet posts its status at once and finishes the deletions it missed.

package main

import (
	"context"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

const partitionAnnotation = "kubelet.fake/partitioned"

// partitions is the set of nodes cut off, shared by the heartbeat and the kubelet.
type partitions struct {
	mu  sync.Mutex
	cut map[string]bool
}

func newPartitions() *partitions { return &partitions{cut: map[string]bool{}} }

// isCut: nil (no kubelet follows the annotation) cuts nothing.
func (p *partitions) isCut(node string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut[node]
}

// set records the node's state and says whether it changed.
func (p *partitions) set(node string, cut bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut[node] == cut {
		return false
	}
	p.cut[node] = cut
	return true
}

// nodePartitioned reads the annotation: "true" (any case) cuts; anything else does not, so a
// typo never takes a node away.
func nodePartitioned(node *v1.Node) bool {
	return strings.EqualFold(strings.TrimSpace(node.Annotations[partitionAnnotation]), "true")
}

// followPartition applies the node's kubelet.fake/partitioned (watchNodes calls it on every add
// and update). When the link comes back, the node reports Ready and every pod of the node is
// synced again, so what changed meanwhile (a deletion, the node controller's not-ready mark) is
// seen.
func (k *kubelet) followPartition(ctx context.Context, node *v1.Node) {
	cut := nodePartitioned(node)
	if !k.parts.set(node.Name, cut) {
		return
	}
	if cut {
		klog.InfoS("fake kubelet: node cut from the control plane", "node", node.Name)
		return
	}
	klog.InfoS("fake kubelet: node reconnected", "node", node.Name)
	if err := renewLease(ctx, k.client, node.Name); err != nil {
		klog.ErrorS(err, "lease renewal failed", "node", node.Name)
	}
	if err := postNodeStatus(ctx, k.client, node.Name); err != nil {
		klog.ErrorS(err, "node status failed", "node", node.Name)
	}
	if k.pods == nil { // the pods' informer is not started yet: it will list them all
		return
	}
	pods, err := k.pods.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == node.Name {
			k.sync(ctx, p)
		}
	}
}

// postNodeStatus posts the node's conditions as Ready now, as each status heartbeat does.
// The node lifecycle controller writes the node too: re-read on a conflict.
func postNodeStatus(ctx context.Context, client kubernetes.Interface, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Conditions = nodeConditions(metav1.Now(), node.Status.Conditions)
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}
