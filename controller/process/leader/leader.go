// Package leader runs the controller's work only on the replica holding the Lease, and fences
// the writes of a leader that may have lost it without knowing (fence.go).
package leader

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Config is the Lease and its timing (client-go's leaderelection).
type Config struct {
	// Namespace of the Lease; empty reads the pod's from its ServiceAccount.
	Namespace, Name                           string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Fence learns of each renewal; nil runs without one.
	Fence *Fence
	// Watchdog fails /healthz for a leader that stopped renewing; nil for none.
	Watchdog *leaderelection.HealthzAdaptor
	// Leading is told when this replica starts and stops leading (a metric).
	Leading func(bool)
}

const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Run runs work only while this replica holds the Lease. On ctx's end (SIGTERM) the work
// finishes first and then the Lease is released, so a rollout hands over at once without two
// writers; when the Lease is lost instead, the process exits non-zero immediately.
func Run(ctx context.Context, kube kubernetes.Interface, cfg Config, work func(context.Context)) error {
	ns := cfg.Namespace
	if ns == "" {
		b, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return fmt.Errorf("--leader-election-namespace is required outside a cluster: %w", err)
		}
		ns = strings.TrimSpace(string(b))
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	id = id + "_" + fmt.Sprint(os.Getpid())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, cfg.Name, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	if cfg.Fence != nil {
		lock = fencedLock{Interface: lock, f: cfg.Fence}
	}
	leading := cfg.Leading
	if leading == nil {
		leading = func(bool) {}
	}
	// The elector's context outlives ctx until the work has stopped: ReleaseOnCancel must only
	// release a Lease whose guarded work is done, or two replicas could write at once.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	workDone := make(chan struct{})
	var started atomic.Bool
	go func() {
		<-ctx.Done()
		if started.Load() {
			<-workDone
		}
		stopElecting()
	}()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		ReleaseOnCancel: true, Name: cfg.Name, WatchDog: cfg.Watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				started.Store(true)
				defer close(workDone)
				if ctx.Err() != nil {
					return // acquired as SIGTERM arrived: release without working
				}
				klog.InfoS("Became leader", "identity", id, "lease", ns+"/"+cfg.Name)
				leading(true)
				wctx, cancel := context.WithCancel(lctx)
				defer context.AfterFunc(ctx, cancel)()
				work(wctx)
			},
			OnStoppedLeading: func() {
				leading(false)
				if ctx.Err() == nil {
					// Lost, not released: in-flight reconciles must not write another byte, so
					// exit now rather than drain them; the Deployment restarts the container.
					klog.ErrorS(nil, "Lost the leader lease; exiting", "identity", id)
					klog.FlushAndExit(klog.ExitFlushTimeout, 1)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(electCtx)
	return nil
}
