package main

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// oneNodeKubelet runs a kubelet of cfg for one fake node (8 GPUs) of client, its pods' IPs
// from 127.octet.0.0/16, until the test ends: then ctx is cancelled (cancel) and every
// process it started is stopped.
func oneNodeKubelet(t *testing.T, ctx context.Context, cancel context.CancelFunc, client *fake.Clientset, cfg kubeletConfig, octet int) *kubelet {
	t.Helper()
	nc := nodeConfig{count: 1, cpu: resource.MustParse("32"), memory: resource.MustParse("256Gi"), gpus: 8, pods: 110}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(0), Labels: map[string]string{fakeNodeLabel: "true"}}, Status: nc.nodeStatus(0, nil)}
	if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := newKubelet(client, cfg, nc.count, newIPAllocator(octet))
	if err := k.run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		k.wg.Wait()
		k.stopProcesses(time.Second)
	})
	return k
}
