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
	ctx, _, k := nodesKubelet(t, nodeConfig{count: 2, cpu: resource.MustParse("32"), memory: resource.MustParse("256Gi"), gpus: 8, pods: 110}, 202)
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

// nodesKubelet is a two-node fake kubelet, not run, over a fake clientset holding nc's nodes,
// for the tests of what it follows in its nodes; ctx ends with the test.
func nodesKubelet(t *testing.T, nc nodeConfig, ipBlock int) (context.Context, *fake.Clientset, *kubelet) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	k := newKubelet(client, kubeletConfig{}, 2, newIPAllocator(ipBlock))
	t.Cleanup(func() {
		cancel()
		k.broadcaster.Shutdown()
	})
	createFakeNodes(t, client, nc)
	return ctx, client, k
}
