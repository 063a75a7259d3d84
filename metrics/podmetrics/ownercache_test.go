package podmetrics

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
)

func partial(gvk schema.GroupVersionKind, namespace, name string, labels map[string]string, owner *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(gvk.Kind + "-" + name), Labels: labels},
	}
	if owner != nil {
		yes := true
		o.OwnerReferences = []metav1.OwnerReference{
			{APIVersion: "example.org/v1", Kind: "Other", Name: "x", UID: "x"}, // not the controller
			{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: &yes},
		}
	}
	return o
}

// TestOwnerCachesResolveTheChain: the metadata caches list the operator's ReplicaSets,
// Deployments, StatefulSets, LeaderWorkerSets and InferenceServices and ServedBy walks them;
// a ReplicaSet without the operator's label is not cached at all.
func TestOwnerCachesResolveTheChain(t *testing.T) {
	managed := map[string]string{"app.kubernetes.io/managed-by": "inferenceservice-operator"}
	isvc := partial(schema.GroupVersionKind{Group: "ai.example.com", Version: "v1alpha1", Kind: "InferenceService"}, "team-a", "llama", nil, nil)
	d := partial(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "team-a", "llama", managed, isvc)
	rs := partial(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, "team-a", "llama-7c9f", managed, d)
	unlabelledRS := partial(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, "team-a", "llama-other", nil, d)
	big := partial(schema.GroupVersionKind{Group: "ai.example.com", Version: "v1alpha1", Kind: "InferenceService"}, "team-a", "big", nil, nil)
	lws := partial(schema.GroupVersionKind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet"}, "team-a", "big", managed, big)
	sts := partial(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, "team-a", "big", map[string]string{lwsNameLabel: "big"}, lws)

	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, isvc, d, rs, unlabelledRS, big, lws, sts)
	pods := corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}))
	o := NewOwnerCaches(client, pods, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), o.HasSynced) {
		t.Fatal("owner caches never synced")
	}

	pod := func(name, model string, owner *metav1.PartialObjectMetadata) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: partial(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "team-a", name, map[string]string{InstanceLabel: model}, owner).ObjectMeta}
		return p
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{pod("llama-7c9f-x", "llama", rs), "llama"},
		{pod("big-0", "big", sts), "big"},
		{pod("llama-other-x", "llama", unlabelledRS), ""},
	} {
		if got, _ := ServedBy(tc.pod, o); got != tc.want {
			t.Errorf("%s: ServedBy = %q, want %q", tc.pod.Name, got, tc.want)
		}
	}
	if got := o.Get(replicaSetKind, "team-a", "llama-7c9f"); got == nil || len(got.GetOwnerReferences()) != 1 || got.GetLabels() != nil {
		t.Errorf("cached ReplicaSet %+v: want its controller reference only", got)
	}
}
