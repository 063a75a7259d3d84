// Package unserved keeps an informer of a CRD's kind from holding readiness down when the API
// server stops serving that kind: its CRD deleted between the operator's discovery and the
// informer's first list (or at any time since). The reflector retries such a list forever
// ("the server could not find the requested resource"), so the informer never syncs and a
// process that waits for it is never ready; the cache of a kind that is not served is empty,
// which is what the server holds, so it counts as synced.
package unserved

import (
	"context"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Synced sets inf's watch error handler (before inf starts) and returns its synced check:
// true once inf has listed, or once a list or watch of it was refused as not found. what
// names the kind in the one log line that says so. The reflector goes on retrying, so a kind
// served again fills the cache.
func Synced(inf cache.SharedIndexInformer, what string) (cache.InformerSynced, error) {
	var gone atomic.Bool
	err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsNotFound(err) {
			if !gone.Swap(true) {
				klog.FromContext(ctx).Info("A watched kind is not served (its CRD deleted?): its cache counts as synced and empty until it is served again", "resource", what, "err", err)
			}
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	if err != nil {
		return nil, err
	}
	return func() bool { return inf.HasSynced() || gone.Load() }, nil
}
