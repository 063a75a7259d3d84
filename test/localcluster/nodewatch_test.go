package main

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWatchNodesReturnsAfterFollowing: watchNodes returns only once its followers have seen
// every node, even when they are slow. Before, it waited for the store alone, so a pod
// could start on a node whose pull time (or GPU fault) was not applied yet (CI's
// TestSlowPull: "Container image ... already present on machine" on a 2 s pull node).
func TestWatchNodesReturnsAfterFollowing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	k := newKubelet(client, kubeletConfig{}, 2, newIPAllocator(202))
	defer k.broadcaster.Shutdown()
	createFakeNodes(t, client, nodeConfig{count: 2, cpu: resource.MustParse("32"), memory: resource.MustParse("256Gi"), gpus: 8, pods: 110})
	var mu sync.Mutex
	seen := map[string]bool{}
	slow := func(_ context.Context, n *v1.Node) {
		time.Sleep(100 * time.Millisecond) // a follower that takes its time, as one under load does
		mu.Lock()
		seen[n.Name] = true
		mu.Unlock()
	}
	if err := k.watchNodes(ctx, slow); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !seen[nodeName(0)] || !seen[nodeName(1)] {
		t.Fatalf("watchNodes returned having followed %v, want both nodes", seen)
	}
}
