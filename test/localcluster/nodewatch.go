// The fake nodes as the fake kubelet sees them: one informer whose adds and updates reach what
// the kubelet follows in a node's annotations (GPU faults, image pull times).

package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// watchNodes calls each follower, in order, with every added or updated node this kubelet
// runs, and returns once the informer has synced: every node's current state has been followed.
func (k *kubelet) watchNodes(ctx context.Context, followers ...func(context.Context, *v1.Node)) error {
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = fakeNodeLabel + "=true" }))
	inf := factory.Core().V1().Nodes().Informer()
	onNode := func(obj any) {
		node, ok := obj.(*v1.Node)
		if !ok {
			return
		}
		if _, ours := k.nodes[node.Name]; !ours {
			return
		}
		for _, follow := range followers {
			follow(ctx, node)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onNode,
		UpdateFunc: func(_, obj any) { onNode(obj) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	// The handlers, not only the store: a pod seen before its node's add was handled would
	// start on a slow node as if its image were present.
	cache.WaitForCacheSync(ctx.Done(), reg.HasSynced)
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return nil
}
