package soak

// The two operator replicas: each runs behind its own loopback proxy (which can cut its
// watches and counts its writes without the Lease's), and a supervisor restarts a replica that
// exits, as a Deployment's kubelet would.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// leaseName is the Lease both replicas compete for.
const leaseName = "inferenceservice-operator-soak"

// resync is the operators' resync period: the write rate at rest is measured over two.
const resync = 10 * time.Second

// replica is one operator slot: its proxy outlives the processes restarted in it.
type replica struct {
	name    string
	proxy   *testenv.Proxy
	gateway string // the admin API's URL (--gateway-url)

	mu        sync.Mutex
	p         *operator.Process
	starts    int
	planned   bool // the current process's exit was caused by the soak (a kill)
	unplanned int  // exits nobody asked for (a lost Lease makes the leader exit, by design)
}

func (r *replica) args() []string {
	return []string{
		"--kubeconfig=" + r.proxy.Kubeconfig,
		"--leader-elect",
		"--leader-election-namespace=" + testenv.SystemNamespace,
		"--leader-election-id=" + leaseName,
		"--resync=" + resync.String(),
		"--backoff-max=2s",
		"--creating-evidence-after=5s",
		"-v=2",
		"--gateway-url=" + r.gateway,
	}
}

// start runs a new process in the slot and waits for it to be ready.
func (r *replica) start(ctx context.Context) error {
	r.mu.Lock()
	r.starts++
	log := filepath.Join(env.Dir, fmt.Sprintf("%s-%d.log", r.name, r.starts))
	r.mu.Unlock()
	p, err := operator.Start(ctx, env.Bin, log, r.args()...)
	if err != nil {
		return err
	}
	if err := p.WaitReady(ctx, 2*time.Minute); err != nil {
		p.Kill()
		return fmt.Errorf("%s: %w (log %s)", r.name, err, log)
	}
	r.mu.Lock()
	r.p, r.planned = p, false
	r.mu.Unlock()
	return nil
}

// process is the slot's current process.
func (r *replica) process() *operator.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p
}

// kill sends SIGKILL to the current process; the supervisor starts the next.
func (r *replica) kill() {
	r.mu.Lock()
	p := r.p
	r.planned = true
	r.mu.Unlock()
	p.Kill()
}

// supervise restarts the slot's process whenever it exits, until ctx ends.
func (r *replica) supervise(ctx context.Context, logf func(string, ...any)) {
	for ctx.Err() == nil {
		p := r.process()
		select {
		case <-ctx.Done():
			return
		case <-p.Exited():
		}
		r.mu.Lock()
		if !r.planned {
			r.unplanned++
			logf("replica %s (pid %d) exited unasked; restarting", r.name, p.Pid())
		}
		r.mu.Unlock()
		// As the kubelet's CrashLoopBackOff: the operator exits at start while the API server is
		// down (discovery fails), so tries back off, 1s doubling to 16s. Bounded in count and by
		// ctx; a slot that never comes back ends its supervision (the checks then fail).
		started := false
		for try := 0; try < 40 && ctx.Err() == nil && !started; try++ {
			if try > 0 {
				backoff := time.NewTimer(min(time.Second<<min(try-1, 4), 16*time.Second)) // a backoff, not a wait for state
				select {
				case <-ctx.Done():
				case <-backoff.C:
				}
			}
			sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			err := r.start(sctx)
			cancel()
			if err != nil {
				logf("replica %s start try %d: %v", r.name, try+1, err)
				continue
			}
			started = true
			logf("replica %s restarted: pid %d", r.name, r.process().Pid())
		}
		if !started {
			logf("replica %s: no process started after 40 tries; supervision ends", r.name)
			return
		}
	}
}

// identity is the Lease holder identity main.go uses: hostname_pid.
func identity(p *operator.Process) string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s_%d", h, p.Pid())
}

// leader returns the replica holding the Lease (its process alive), and the other.
func leader(ctx context.Context, rs []*replica) (lead, standby *replica, err error) {
	l, err := env.Kube.CoordinationV1().Leases(testenv.SystemNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	if l.Spec.HolderIdentity == nil {
		return nil, nil, fmt.Errorf("no holder")
	}
	for i, r := range rs {
		p := r.process()
		select {
		case <-p.Exited():
			continue
		default:
		}
		if identity(p) == *l.Spec.HolderIdentity {
			return r, rs[1-i], nil
		}
	}
	return nil, nil, fmt.Errorf("holder %s is none of the live replicas", *l.Spec.HolderIdentity)
}

// waitLeader polls until a live replica holds the Lease.
func waitLeader(ctx context.Context, rs []*replica, timeout time.Duration) (lead, standby *replica, err error) {
	deadline := time.Now().Add(testenv.Scaled(timeout))
	for {
		lead, standby, err = leader(ctx, rs)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return lead, standby, err
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
}

// restWrites sums both proxies' non-Lease writes in [from, to).
func restWrites(rs []*replica, from, to time.Time) int {
	return len(restWriteRequests(rs, from, to))
}

// restWriteRequests are both proxies' non-Lease writes in [from, to).
func restWriteRequests(rs []*replica, from, to time.Time) []testenv.Request {
	var out []testenv.Request
	for _, r := range rs {
		out = append(out, r.proxy.WriteRequests(from, to)...)
	}
	return out
}

// writeSummary names writes by method, path and answer, the most frequent first (at most
// max), so a report says what the operators still wrote at rest, not only how much.
func writeSummary(reqs []testenv.Request, max int) string {
	count := map[string]int{}
	for _, r := range reqs {
		count[fmt.Sprintf("%s %s %d", r.Method, r.Path, r.Code)]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	mostFirst(keys, func(k string) int { return count[k] })
	var b strings.Builder
	for i, k := range keys {
		if i == max {
			fmt.Fprintf(&b, "  ... and %d more\n", len(keys)-max)
			break
		}
		fmt.Fprintf(&b, "  %dx %s\n", count[k], k)
	}
	return b.String()
}

// mostFirst sorts keys by n, the largest first, then by name.
func mostFirst(keys []string, n func(string) int) {
	sort.Slice(keys, func(i, j int) bool {
		if n(keys[i]) != n(keys[j]) {
			return n(keys[i]) > n(keys[j])
		}
		return keys[i] < keys[j]
	})
}
