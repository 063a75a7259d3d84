package soak

// The faults: a seeded schedule with jitter, and what each kind does. Each returns when its
// fault is over (the process restarted, the API server back, the storm ended); the soak then
// measures how long the world takes to converge.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// Fault kinds. A watch resumed from a compacted revision gets 410 Gone from a real API server;
// faultWatchGone forces that answer.
const (
	faultLeaderKill   = "leader-kill"   // SIGKILL of the Lease holder; the supervisor restarts it
	faultStandbyPause = "standby-pause" // SIGSTOP of the other replica, SIGCONT after a while
	// The API server restarts alone, as a real one rolls: the controllers, the kubelet and the
	// pods keep running (a restart of the whole local cluster would restart every model server
	// with it, which no real API server restart does: the CI soak lost every request to it).
	faultAPIRestart  = "apiserver-restart"
	faultWatchCut    = "watch-cut"       // both replicas' watches end (their proxies cut them)
	faultCompaction  = "etcd-compaction" // etcd compacted to its current revision
	faultStorm       = "conflict-storm"  // writers race on one isvc's labels while the operator writes status
	faultWatchGone   = "watch-gone"      // watches cut, and every watch resumed during the hold answered 410 Gone
	faultAdapterKill = "adapter-kill"    // the metrics adapter SIGKILLed, started again after the hold
	faultNodeLost    = "node-lost"       // a node's kubelet cut from the control plane until its pods are evicted, then back
	faultTokenRotate = "token-rotation"  // the operators' token file rewritten, the old token revoked at once
	faultGPU         = "gpu-fault"       // one node's GPUs fail (ECC) under their model servers, then heal
	faultGatewayDown = "gateway-down"    // the gateway's admin API refuses connections for minutes
)

var faultKinds = []string{faultLeaderKill, faultStandbyPause, faultAPIRestart, faultWatchCut, faultCompaction, faultStorm, faultWatchGone, faultAdapterKill, faultNodeLost, faultTokenRotate, faultGPU, faultGatewayDown}

// fault is one scheduled fault.
type fault struct {
	At   time.Duration // after the chaos began
	Kind string
	Hold time.Duration // how long a pause or a storm lasts
}

// schedule draws the faults of a run: about two a minute, spaced evenly over the first 80% of
// the chaos with ±30% jitter, each round of every kind in a seeded order, so every kind comes
// before any repeats (a fault and the convergence after it can outlast its slot: the run skips
// what falls past the chaos's end, never a kind's first).
func schedule(rng *rand.Rand, chaos time.Duration) []fault {
	n := max(len(faultKinds), int(chaos.Minutes()*2))
	kinds := make([]string, 0, n)
	for len(kinds) < n {
		round := append([]string(nil), faultKinds...)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		kinds = append(kinds, round...)
	}
	kinds = kinds[:n]
	span := time.Duration(float64(chaos) * 0.8)
	step := span / time.Duration(n)
	out := make([]fault, n)
	for i, k := range kinds {
		jitter := time.Duration((rng.Float64()*0.6 - 0.3) * float64(step))
		out[i] = fault{At: max(0, step*time.Duration(i)+step/2+jitter), Kind: k, Hold: time.Duration(5+rng.IntN(10)) * time.Second}
	}
	return out
}

func (f fault) String() string {
	return fmt.Sprintf("%s at %s (hold %s)", f.Kind, f.At.Round(100*time.Millisecond), f.Hold)
}

// stormNS holds the storm's own isvc, out of the workload's reach.
const stormNS = "soak-storm"

// inject runs one fault and returns when it is over, with a line for the log.
func (s *soakRun) inject(ctx context.Context, f fault) (string, error) {
	switch f.Kind {
	case faultLeaderKill:
		lead, _, err := waitLeader(ctx, s.replicas, time.Minute)
		if err != nil {
			return "", err
		}
		pid := lead.process().Pid()
		killed := time.Now()
		lead.kill()
		// The supervisor starts the next process; wait for a (new) leader.
		if _, _, err := waitLeaderOtherThan(ctx, s.replicas, pid, 2*time.Minute); err != nil {
			return "", err
		}
		return fmt.Sprintf("SIGKILL leader %s pid %d; a leader again after %.1fs", lead.name, pid, time.Since(killed).Seconds()), nil
	case faultStandbyPause:
		_, standby, err := waitLeader(ctx, s.replicas, time.Minute)
		if err != nil {
			return "", err
		}
		p := standby.process()
		select {
		case <-p.Exited():
			// Its supervisor is still restarting it (after an earlier fault): nothing to pause.
			return fmt.Sprintf("standby %s not running (being restarted): no pause", standby.name), nil
		default:
		}
		// It may exit between the check and the signal (ESRCH): its supervisor restarts it.
		if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); errors.Is(err, syscall.ESRCH) {
			return fmt.Sprintf("standby %s pid %d exited before the pause: no pause", standby.name, p.Pid()), nil
		} else if err != nil {
			return "", err
		}
		hold := time.NewTimer(f.Hold) // the schedule's pause length, not a wait for state
		select {
		case <-hold.C:
		case <-ctx.Done():
		}
		if err := syscall.Kill(p.Pid(), syscall.SIGCONT); errors.Is(err, syscall.ESRCH) {
			return fmt.Sprintf("standby %s pid %d exited while paused", standby.name, p.Pid()), nil
		} else if err != nil {
			return "", err
		}
		return fmt.Sprintf("SIGSTOP standby %s pid %d for %s, SIGCONT", standby.name, p.Pid(), f.Hold), nil
	case faultAPIRestart:
		began := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if err := env.Cluster.RestartAPIServer(rctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("API server restarted (alone, its pods serving) in %.1fs", time.Since(began).Seconds()), nil
	case faultWatchCut:
		for _, r := range s.replicas {
			r.proxy.Cut()
		}
		return "both replicas' watches cut", nil
	case faultWatchGone:
		// As a server whose history begins at rev answers: a watch resumed from an older
		// resourceVersion gets 410 Gone; a relist, and a watch from what it returned, do not.
		rev, err := etcdRevision(ctx)
		if err != nil {
			return "", err
		}
		var gone atomic.Int64
		for _, r := range s.replicas {
			r.proxy.Answer(func(req *http.Request) int {
				q := req.URL.Query()
				if v, err := strconv.ParseInt(q.Get("resourceVersion"), 10, 64); err == nil && v > 0 && v < rev && q.Get("watch") == "true" {
					gone.Add(1)
					return http.StatusGone
				}
				return 0
			})
			r.proxy.Cut()
		}
		hold := time.NewTimer(f.Hold) // the schedule's length, not a wait for state
		select {
		case <-hold.C:
		case <-ctx.Done():
		}
		for _, r := range s.replicas {
			r.proxy.Answer(nil)
		}
		return fmt.Sprintf("both replicas' watches cut; %d watches resumed from before revision %d answered 410 Gone for %s (each informer relists)", gone.Load(), rev, f.Hold), nil
	case faultAdapterKill:
		pid := env.adapter.Pid()
		env.adapter.Kill()
		hold := time.NewTimer(f.Hold) // the schedule's length, not a wait for state
		select {
		case <-hold.C:
		case <-ctx.Done():
		}
		began := time.Now()
		a, err := env.adapter.Restart(ctx)
		if err != nil {
			return "", err
		}
		env.adapter = a
		return fmt.Sprintf("metrics adapter pid %d SIGKILLed, down %s, serving again %.1fs after its restart", pid, f.Hold, time.Since(began).Seconds()), nil
	case faultCompaction:
		rev, err := compactEtcd(ctx)
		if err != nil {
			return "", err
		}
		return "etcd compacted to revision " + rev, nil
	case faultStorm:
		return s.storm(ctx, f.Hold)
	case faultNodeLost:
		return s.nodeLost(ctx, nodeLostHold(f.Hold))
	case faultTokenRotate:
		return s.rotateToken(ctx, f.Hold)
	case faultGPU:
		return s.gpuFault(ctx, gpuFaultHold(f.Hold))
	case faultGatewayDown:
		return s.gatewayDown(ctx, gatewayDownHold(f.Hold))
	}
	return "", fmt.Errorf("unknown fault %q", f.Kind)
}

// waitLeaderOtherThan polls until a live replica other than pid holds the Lease.
func waitLeaderOtherThan(ctx context.Context, rs []*replica, pid int, timeout time.Duration) (lead, standby *replica, err error) {
	deadline := time.Now().Add(timeout)
	for {
		lead, standby, err = leader(ctx, rs)
		if err == nil && lead.process().Pid() != pid {
			return lead, standby, nil
		}
		if err == nil {
			err = fmt.Errorf("pid %d still holds the Lease", pid)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, nil, err
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
}

// compactEtcd compacts etcd, through its JSON gateway on loopback, to its current revision.
// etcdCall posts req to etcd's JSON gateway at path and decodes its answer into resp.
func etcdCall(ctx context.Context, path string, req, resp any) error {
	base, err := env.Cluster.EtcdURL()
	if err != nil {
		return err
	}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(hr)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, r.Status, b)
	}
	return json.Unmarshal(b, resp)
}

// etcdRevision is etcd's current revision (the API server's resourceVersions are its revisions).
func etcdRevision(ctx context.Context) (int64, error) {
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := etcdCall(ctx, "/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/")), "limit": 1}, &rng); err != nil {
		return 0, err
	}
	return strconv.ParseInt(rng.Header.Revision, 10, 64)
}

// compactEtcd compacts etcd to its current revision and returns it.
func compactEtcd(ctx context.Context) (string, error) {
	rev, err := etcdRevision(ctx)
	if err != nil {
		return "", err
	}
	var out map[string]any
	return strconv.FormatInt(rev, 10), etcdCall(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, &out)
}

// storm is TestConflictStorm's user script: writers race on the storm isvc's labels (one of
// them on its replicas too) for hold; no user update may be lost.
func (s *soakRun) storm(ctx context.Context, hold time.Duration) (string, error) {
	cl := env.Dyn.Resource(crd.Resource).Namespace(stormNS)
	storm := testenv.ConflictStorm(ctx, cl, "storm", 4, time.Now().Add(hold))
	writes, conflicts, lastReplicas := storm.Writes, storm.Conflicts, storm.LastReplicas
	if lastReplicas >= 0 {
		s.world.set(s.stormModel, func(m *model) { m.replicas = lastReplicas })
	}
	var u *unstructured.Unstructured
	if err := retry(ctx, time.Minute, func() (err error) {
		u, err = cl.Get(ctx, "storm", metav1.GetOptions{})
		return err
	}); err != nil {
		return "", err
	}
	if err := storm.Lost(u); err != nil {
		return "", fmt.Errorf("storm: %w", err)
	}
	return fmt.Sprintf("conflict storm %s: %d user writes, %d user conflicts, none lost", hold, writes, conflicts), nil
}
