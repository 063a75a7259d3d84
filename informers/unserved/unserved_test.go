package unserved

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// informerListing is a real shared informer whose every list fails with err (nil: an empty
// list and a watch that never sends).
func informerListing(err error) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			if err != nil {
				return nil, err
			}
			return &corev1.ConfigMapList{}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}
	// A plain list then watch: the fake watch sends no initial events for watch-list mode.
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, listOnly{}), &corev1.ConfigMap{}, 0, cache.Indexers{})
}

// listOnly tells the reflector its client has no watch-list semantics.
type listOnly struct{}

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// TestSynced: a kind the server does not serve (a list refused as not found, as the API
// server answers for a CRD deleted after discovery) counts as synced; a list refused for any
// other reason does not, and a served kind syncs as usual. Before, the operator waited on the
// informer's own HasSynced: e2e TestMetricsSecure's operator, started as an earlier test's
// stand-in Kueue and LeaderWorkerSet CRDs went, was "not ready after 1m0s".
func TestSynced(t *testing.T) {
	gr := schema.GroupResource{Group: "leaderworkerset.x-k8s.io", Resource: "leaderworkersets"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"not served", apierrors.NewNotFound(gr, ""), true},
		{"forbidden", apierrors.NewForbidden(gr, "", nil), false},
		{"served", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inf := informerListing(tc.err)
			synced, err := Synced(inf, gr.String())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go inf.RunWithContext(ctx)
			// The reflector's first list is at once; its retries back off from 800ms. Two
			// seconds see the first list's outcome and at least one retry.
			deadline := time.Now().Add(2 * time.Second)
			for !synced() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := synced(); got != tc.want {
				t.Fatalf("synced %v, want %v (informer's own HasSynced %v)", got, tc.want, inf.HasSynced())
			}
		})
	}
	t.Run("after start", func(t *testing.T) {
		inf := informerListing(nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go inf.RunWithContext(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("not synced")
		}
		if _, err := Synced(inf, gr.String()); err == nil {
			t.Fatal("a started informer's handler set without error")
		}
	})
}
