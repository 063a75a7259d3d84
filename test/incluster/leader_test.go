package incluster

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// leaderArgs are short lease timings so failover fits a test: a dead leader's Lease expires
// after 4s; a live one gives up renewing after 3s; candidates retry every 250ms.
func leaderArgs(ns, lease string) []string {
	return []string{
		"--kubeconfig=" + env.SAKubeconfig,
		"--namespaces=" + ns,
		"--leader-elect",
		"--leader-election-namespace=" + systemNamespace,
		"--leader-election-id=" + lease,
		"--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=250ms",
		"--backoff-max=2s",
		"-v=2",
	}
}

func reconciles(t *testing.T, p *operator.Process) float64 {
	return counter(t, p, "controller_runtime_reconcile_total", nil)
}

// TestLeaderElection: of two replicas only the leader reconciles (the other makes no write at
// all); kill -9 of the leader hands the work over within the lease duration; SIGTERM of the
// next leader hands over at once, as during a rollout.
func TestLeaderElection(t *testing.T) {
	ns := env.Namespace(t)
	const lease = "isvc-leader-test"
	args := leaderArgs(ns, lease)

	a := startOperator(t, env.Bin, "leader-a", args...)
	waitHolder(t, systemNamespace, lease, identity(t, a), time.Now(), 30*time.Second)
	b := startOperator(t, env.Bin, "leader-b", args...)

	createISVC(t, ns, "qwen3", 2)
	env.WaitPhase(t, ns, "qwen3", crd.PhaseReady, 90*time.Second)
	if r := reconciles(t, a); r == 0 {
		t.Fatal("the leader ran no reconcile")
	}
	if w, r := writes(t, b), reconciles(t, b); w != 0 || r != 0 {
		t.Fatalf("the standby wrote %v times and reconciled %v times", w, r)
	}
	t.Logf("leader a: %v writes, %v reconciles; standby b: 0 writes, 0 reconciles", writes(t, a), reconciles(t, a))
	for _, p := range []struct {
		name   string
		p      *operator.Process
		leader float64
	}{{"a", a, 1}, {"b", b, 0}} {
		// /healthz carries the leader watchdog; both replicas are healthy.
		resp, err := http.Get("http://" + p.p.ProbeAddr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: /healthz %d", p.name, resp.StatusCode)
		}
		if got := counter(t, p.p, "leader_election_master_status", func(l map[string]string) bool { return l["name"] == lease }); got != p.leader {
			t.Errorf("%s: leader_election_master_status %v, want %v", p.name, got, p.leader)
		}
	}

	// kill -9: nothing is released; b takes over when the Lease expires.
	killed := time.Now()
	if err := syscall.Kill(a.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took := waitHolder(t, systemNamespace, lease, identity(t, b), killed, 30*time.Second)
	t.Logf("kill -9 failover: b acquired the Lease %s after the leader was killed (lease duration 4s)", took.Round(time.Millisecond))

	// b now reconciles: a spec change reaches the Deployment through b's writes.
	before := writes(t, b)
	env.Kubectl(t, "patch", "-n", ns, "isvc/qwen3", "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	testenv.Eventually(t, 30*time.Second, "b scales the Deployment", func() error {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "qwen3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ptr.Deref(d.Spec.Replicas, 0) != 3 {
			return fmt.Errorf("replicas %d", ptr.Deref(d.Spec.Replicas, 0))
		}
		return nil
	})
	if after := writes(t, b); after <= before {
		t.Fatalf("b's writes did not grow: %v -> %v", before, after)
	}

	// SIGTERM: b finishes its work, releases the Lease, and c takes it without waiting for expiry.
	c := startOperator(t, env.Bin, "leader-c", args...)
	termed := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop(30 * time.Second) }()
	took = waitHolder(t, systemNamespace, lease, identity(t, c), termed, 10*time.Second)
	if err := <-stopped; err != nil {
		t.Fatalf("b on SIGTERM: %v", err)
	}
	t.Logf("SIGTERM handover: c acquired the Lease %s after b got SIGTERM (lease duration 4s, retry 250ms)", took.Round(time.Millisecond))
	if w := writes(t, c); w == 0 {
		t.Fatal("c, the leader, made no write (not even a Lease renewal)")
	}
	env.Kubectl(t, "patch", "-n", ns, "isvc/qwen3", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	waitDeploymentReplicas(t, ns, "qwen3", 2)
}

func waitDeploymentReplicas(t *testing.T, ns, name string, want int32) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("deployment %s/%s replicas %d", ns, name, want), func() error {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := ptr.Deref(d.Spec.Replicas, 0); got != want {
			return fmt.Errorf("replicas %d", got)
		}
		return nil
	})
}

// TestLeaseLostExits: when another holder takes the Lease (a partition, a paused process),
// the old leader stops at once: it exits non-zero within the renew deadline and writes no more.
func TestLeaseLostExits(t *testing.T) {
	ns := env.Namespace(t)
	const lease = "isvc-lost-test"
	a := startOperator(t, env.Bin, "lost-a", leaderArgs(ns, lease)...)
	waitHolder(t, systemNamespace, lease, identity(t, a), time.Now(), 30*time.Second)

	stolen := time.Now()
	patch := fmt.Sprintf(`{"spec":{"holderIdentity":"thief","leaseDurationSeconds":3600,"renewTime":%q,"acquireTime":%q}}`,
		metav1.NowMicro().Format(metav1.RFC3339Micro), metav1.NowMicro().Format(metav1.RFC3339Micro))
	if _, err := env.Kube.CoordinationV1().Leases(systemNamespace).Patch(context.Background(), lease,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Exited():
	case <-time.After(testenv.Scaled(30 * time.Second)):
		t.Fatalf("the operator kept running %s after losing its Lease", testenv.Scaled(30*time.Second))
	}
	t.Logf("lease lost: the leader exited %s after the Lease was taken (renew deadline 3s)", time.Since(stolen).Round(time.Millisecond))
	if err := a.Stop(time.Second); err == nil {
		t.Fatal("the operator exited 0 after losing its Lease; want non-zero so the kubelet restarts it")
	} else {
		t.Logf("exit: %v", err)
	}
	if h, _ := leaseHolder(systemNamespace, lease); h != "thief" {
		t.Fatalf("lease holder %q, want thief (the old leader must not release a Lease it lost)", h)
	}
}
