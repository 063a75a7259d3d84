package incluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// replica is one operator process behind its own recording proxy.
type replica struct {
	name string
	p    *operator.Process
	wire *testenv.Proxy
}

func startReplica(t *testing.T, name string, args []string) *replica {
	t.Helper()
	proxy := env.StartProxy(t)
	// A later --kubeconfig overrides the one in args (Go flags: the last value wins).
	p := startOperator(t, env.Bin, name, append(append([]string{}, args...), "--kubeconfig="+proxy.Kubeconfig)...)
	return &replica{name, p, proxy}
}

// leaseAcquired polls until the Lease is held by one of cands and returns it and its acquireTime.
func leaseAcquired(t *testing.T, lease string, cands []*replica, timeout time.Duration) (*replica, time.Time) {
	t.Helper()
	var got *replica
	var at time.Time
	testenv.Eventually(t, timeout, "lease "+lease+" taken over", func() error {
		l, err := env.Kube.CoordinationV1().Leases(systemNamespace).Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range cands {
			if h := l.Spec.HolderIdentity; h != nil && *h == identity(t, c.p) && l.Spec.AcquireTime != nil {
				got, at = c, l.Spec.AcquireTime.Time
				return nil
			}
		}
		return fmt.Errorf("holder %v", l.Spec.HolderIdentity)
	})
	return got, at
}

// countDeployments is the number of Deployments in ns, for progress figures.
func countDeployments(t *testing.T, ns string) int {
	t.Helper()
	l, err := env.Kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// checkFleet waits until every isvc in ns is Ready with its generation observed and all
// replicas ready, then checks it has exactly one Deployment, Service and HPA, each controlled
// by it, and nothing else. It returns how many objects it checked and how many were wrong.
func checkFleet(t *testing.T, ns string, n int, timeout time.Duration) (checked, wrong int) {
	t.Helper()
	uids := map[string]types.UID{}
	testenv.Eventually(t, timeout, fmt.Sprintf("%d isvcs Ready", n), func() error {
		l, err := env.Dyn.Resource(crd.Resource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		bad := 0
		for i := range l.Items {
			isvc, err := crd.FromUnstructured(&l.Items[i])
			if err != nil {
				return err
			}
			s := isvc.Status
			if s.Phase != crd.PhaseReady || s.ObservedGeneration != isvc.Generation || int64(s.ReadyReplicas) != int64(isvc.Spec.Replicas) {
				bad++
			}
			uids[isvc.Name] = isvc.UID
		}
		if len(l.Items) != n || bad > 0 {
			return fmt.Errorf("%d isvcs, %d not Ready for their generation", len(l.Items), bad)
		}
		return nil
	})
	ctx := testenv.Ctx(t, time.Minute)
	deps, err := env.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := env.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hpas, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []metav1.Object
	kinds := map[string][]metav1.Object{}
	for i := range deps.Items {
		kinds["Deployment"] = append(kinds["Deployment"], &deps.Items[i])
	}
	for i := range svcs.Items {
		kinds["Service"] = append(kinds["Service"], &svcs.Items[i])
	}
	for i := range hpas.Items {
		kinds["HorizontalPodAutoscaler"] = append(kinds["HorizontalPodAutoscaler"], &hpas.Items[i])
	}
	for kind, l := range kinds {
		if len(l) != n {
			wrong++
			t.Errorf("%d %ss for %d isvcs", len(l), kind, n)
		}
		seen := map[string]bool{}
		for _, o := range l {
			ref := metav1.GetControllerOf(o)
			if ref == nil || ref.UID != uids[o.GetName()] || seen[o.GetName()] {
				wrong++
				t.Errorf("%s %s: not controlled by its isvc, or twice: %+v", kind, o.GetName(), ref)
			}
			seen[o.GetName()] = true
			objs = append(objs, o)
		}
	}
	return n + len(objs), wrong
}

// failoverN is the fleet size: FAILOVER_N, default 100 for CI; 500 is the full size.
func failoverN() int {
	if v, err := strconv.Atoi(os.Getenv("FAILOVER_N")); err == nil && v > 0 {
		return v
	}
	return 100
}

// TestLeaderFailoverUnderLoad: three replicas; kill -9 the leader while N isvcs converge, then
// SIGSTOP the new leader mid-convergence until a standby takes the Lease, and SIGCONT it. The
// resumed old leader must not write (the write fence) and must exit; the fleet converges with
// exactly one Deployment, Service and HPA per isvc.
func TestLeaderFailoverUnderLoad(t *testing.T) {
	n := failoverN()
	ns := env.Namespace(t)
	const lease = "isvc-failover-test"
	args := leaderArgs(ns, lease)
	a := startReplica(t, "failover-a", args)
	leaseAcquired(t, lease, []*replica{a}, 30*time.Second)
	b := startReplica(t, "failover-b", args)
	c := startReplica(t, "failover-c", args)

	start := time.Now()
	created := make(chan error, 4)
	for w := 0; w < 4; w++ {
		go func() {
			var err error
			for i := w; i < n; i += 4 {
				name := fmt.Sprintf("f-%04d", i)
				if _, e := env.CreateISVC(context.Background(), ns, name, map[string]any{
					"model": "m", "replicas": int64(1), "gpusPerReplica": int64(0),
					"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}},
				}); e != nil && err == nil {
					err = e
				}
			}
			created <- err
		}()
	}

	// kill -9 the leader once a quarter of the Deployments exist.
	testenv.Eventually(t, 2*time.Minute, "a quarter of the Deployments", func() error {
		if d := countDeployments(t, ns); d < n/4 {
			return fmt.Errorf("%d deployments", d)
		}
		return nil
	})
	killed := time.Now()
	atKill := countDeployments(t, ns)
	if err := syscall.Kill(a.p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	leader, acquired := leaseAcquired(t, lease, []*replica{b, c}, 30*time.Second)
	t.Logf("kill -9 of the leader at %d/%d Deployments: %s took the Lease %s later (lease 4s)",
		atKill, n, leader.name, acquired.Sub(killed).Round(time.Millisecond))
	standby := b
	if leader == b {
		standby = c
	}

	// SIGSTOP the new leader in the middle of its work, past its lease.
	testenv.Eventually(t, time.Minute, leader.name+" writing", func() error {
		if w := leader.wire.Writes(acquired, time.Now().Add(time.Hour)); w < 10 {
			return fmt.Errorf("%d writes", w)
		}
		return nil
	})
	stopped := time.Now()
	if err := syscall.Kill(leader.p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-leader.p.Exited():
		default:
			_ = syscall.Kill(leader.p.Pid(), syscall.SIGCONT)
		}
	})
	atStop := countDeployments(t, ns)
	taker, takenAt := leaseAcquired(t, lease, []*replica{standby}, 30*time.Second)
	t.Logf("SIGSTOP of %s at %d/%d Deployments (%d writes of its own): %s took the Lease %s later",
		leader.name, atStop, n, leader.wire.Writes(acquired, stopped), taker.name, takenAt.Sub(stopped).Round(time.Millisecond))
	resumed := time.Now()
	if err := syscall.Kill(leader.p.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leader.p.Exited():
	case <-time.After(testenv.Scaled(30 * time.Second)):
		t.Fatalf("%s still runs %s after resuming without its Lease", leader.name, testenv.Scaled(30*time.Second))
	}
	exited := time.Now()
	exitErr := leader.p.Stop(time.Second)
	if exitErr == nil {
		t.Errorf("%s exited 0 after losing its Lease", leader.name)
	}
	fenced := strings.Count(readLog(t, leader.name), "Refused a write")
	// The in-flight window runs from the resume to the process's exit, two events, not a fixed
	// time after SIGCONT: a frozen process runs again whenever a loaded machine schedules it, so
	// a wall-clock window measures the load. A write that passed the fence just before SIGSTOP
	// goes on the wire once the process runs (no client-side check can stop a write already in
	// flight; that needs fencing at the server); every check after the resume refuses, since
	// the clock ran on past the renew deadline. So each write the old leader sent after the
	// takeover was in flight at the pause, and there can be no more of them than requests in
	// flight at once.
	var inFlight []testenv.Request
	for _, r := range leader.wire.Requests() {
		if r.At.Before(takenAt) || r.Method == http.MethodGet || strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/") {
			continue
		}
		inFlight = append(inFlight, r)
	}
	// How long after the process ran again the in-flight writes reached the wire: from its
	// first request after SIGCONT (a read or a write) to its last write.
	var first, last time.Time
	for _, r := range leader.wire.Requests() {
		if !r.At.Before(resumed) && (first.IsZero() || r.At.Before(first)) {
			first = r.At
		}
	}
	for _, r := range inFlight {
		if r.At.After(last) {
			last = r.At
		}
	}
	window := time.Duration(0)
	if len(inFlight) > 0 && !first.IsZero() {
		window = last.Sub(first)
	}
	t.Logf("%s resumed, exited %s later (%v); writes on the wire after %s took over: %d, all in flight at the pause (the last %s after the process's first request on resuming); writes fenced: %d",
		leader.name, exited.Sub(resumed).Round(time.Millisecond), exitErr, taker.name, len(inFlight), window.Round(time.Millisecond), fenced)
	if len(inFlight) > 8*7 {
		t.Errorf("two writers: %d writes of %s after %s became leader, more than 8 workers applying at most 7 children each can have in flight", len(inFlight), leader.name, taker.name)
	}
	if w := standby.wire.Writes(time.Time{}, takenAt); w != 0 {
		t.Errorf("%s wrote %d times while standby", standby.name, w)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	for w := 1; w < 4; w++ {
		if err := <-created; err != nil {
			t.Fatal(err)
		}
	}
	checked, wrong := checkFleet(t, ns, n, 5*time.Minute)
	t.Logf("N=%d: converged %.1fs after the resume (%.1fs in all); %d objects checked (isvcs and children), %d lost, duplicated or wrong",
		n, time.Since(resumed).Seconds(), time.Since(start).Seconds(), checked, wrong)
}
