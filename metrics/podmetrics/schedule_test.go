package podmetrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// staller accepts connections and never answers them: a pod behind a default-deny
// NetworkPolicy that drops rather than refuses, or a tenant's pod that never serves /metrics.
type staller struct {
	addr       *net.TCPAddr
	open, peak atomic.Int32
	accepted   atomic.Int32
	mu         sync.Mutex
	conns      []net.Conn
}

func newStaller(t *testing.T) *staller {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &staller{addr: ln.Addr().(*net.TCPAddr)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			n := s.open.Add(1)
			for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go func() { // the client gives up: the connection closes
				_, _ = c.Read(make([]byte, 1<<16))
				for {
					if _, err := c.Read(make([]byte, 1<<16)); err != nil {
						break
					}
				}
				s.open.Add(-1)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

func (s *staller) pod(namespace, name string) *corev1.Pod {
	p := modelPod(name, "quiet", s.addr.IP.String(), int32(s.addr.Port), true)
	p.Namespace = namespace
	p.UID = types.UID(namespace + "/" + name)
	return p
}

// counted serves page(waiting) and counts the requests.
func counted(waiting int, hits *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		page(waiting)(w, r)
	}
}

// owned gives each pod a UID and the owner chain of an InferenceService named as its label.
func owned(pods ...*corev1.Pod) fakeOwners {
	owners := fakeOwners{}
	for _, p := range pods {
		if p.UID == "" {
			p.UID = types.UID(p.Namespace + "/" + p.Name)
		}
		owners.deployment(p, p.Labels[InstanceLabel])
	}
	return owners
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond) // polling, not waiting for state
	}
}

// TestSilentNamespaceLeavesOthersRead: a namespace of pods that accept and never answer
// holds at most its bound of reads, and every other model pod is read and served as soon as
// it answers, again each period, while those reads still hang.
func TestSilentNamespaceLeavesOthersRead(t *testing.T) {
	quiet := newStaller(t)
	var pods []*corev1.Pod
	for i := range 6 { // listed first: a pass in list order reaches them first
		pods = append(pods, quiet.pod("quiet", fmt.Sprint("silent-", i)))
	}
	hits := make([]*atomic.Int32, 3)
	for i := range hits {
		hits[i] = &atomic.Int32{}
		pods = append(pods, servingPod(t, fmt.Sprint("healthy-", i), "llama", counted(i+1, hits[i])))
	}
	owners := owned(pods...)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	const period = time.Minute
	s, err := New(Config{Period: period, Timeout: time.Hour, Concurrency: 4, NamespaceConcurrency: 2, Clock: clk, Owners: owners,
		Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	healthy := pods[6:]
	eventually(t, "every healthy pod served while the silent namespace's reads hang", func() error {
		for i, p := range healthy {
			if r, ok := s.Reading(p, clk.Now()); !ok || r.Waiting != float64(i+1) {
				return fmt.Errorf("%s: %+v, %v", p.Name, r, ok)
			}
		}
		return nil
	})
	if p := quiet.peak.Load(); p > 2 {
		t.Errorf("the silent namespace held %d reads at once, want at most its bound 2", p)
	}

	// A period on: each healthy pod is read again, the silent reads still hanging.
	before := hits[0].Load()
	clk.Step(period)
	eventually(t, "a healthy pod read again a period on", func() error {
		r, ok := s.Reading(healthy[0], clk.Now())
		if hits[0].Load() == before || !ok || !r.At.Equal(clk.Now()) {
			return fmt.Errorf("%d reads, reading %+v %v at %v", hits[0].Load(), r, ok, clk.Now())
		}
		return nil
	})
	if quiet.open.Load() == 0 {
		t.Fatal("the silent reads ended: the test no longer shows reads passing them")
	}
}

// TestImpostorPodsAreNotRead: pods that carry the operator's labels but that no
// InferenceService's children control are never read, so they cannot cost a pass anything.
func TestImpostorPodsAreNotRead(t *testing.T) {
	var legitHits atomic.Int32
	legit := servingPod(t, "llama-1", "llama", counted(2, &legitHits))
	owners := owned(legit)
	var impostorHits atomic.Int32
	noOwner := servingPod(t, "impostor-1", "llama", counted(50, &impostorHits))
	noOwner.UID = "impostor-1"
	stranger := servingPod(t, "impostor-2", "llama", counted(50, &impostorHits))
	stranger.UID = "impostor-2"
	plain := owners.add(deploymentKind, "team-a", "web", nil, isvcKind)
	controlledBy(stranger, owners.add(replicaSetKind, "team-a", "web-1", plain, deploymentKind), replicaSetKind)
	plain.OwnerReferences = nil
	pods := []*corev1.Pod{noOwner, stranger, legit}

	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s, err := New(Config{Period: time.Minute, Timeout: 5 * time.Second, Concurrency: 2, Clock: clk, Owners: owners,
		Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	eventually(t, "the model pod served", func() error {
		if _, ok := s.Reading(legit, clk.Now()); !ok {
			return fmt.Errorf("no reading")
		}
		return nil
	})
	if n := impostorHits.Load(); n != 0 {
		t.Errorf("impostor pods were read %d times", n)
	}
	for _, p := range []*corev1.Pod{noOwner, stranger} {
		if r, ok := s.Reading(p, clk.Now()); ok {
			t.Errorf("impostor %s has a reading %+v", p.Name, r)
		}
	}
}

// TestRecreatedPodStartsWithoutReading: a StatefulSet's pod recreated under the same name is
// a new pod; the queue its namesake reported is not its own.
func TestRecreatedPodStartsWithoutReading(t *testing.T) {
	old := servingPod(t, "big-0", "big", page(5))
	owners := owned(old)
	var mu sync.Mutex
	pods := []*corev1.Pod{old}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s, err := New(Config{Period: time.Minute, Timeout: time.Hour, Concurrency: 2, Clock: clk, Owners: owners,
		Pods: func() ([]*corev1.Pod, error) { mu.Lock(); defer mu.Unlock(); return pods, nil }}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	eventually(t, "the first pod served", func() error {
		if r, ok := s.Reading(old, clk.Now()); !ok || r.Waiting != 5 {
			return fmt.Errorf("%+v, %v", r, ok)
		}
		return nil
	})
	// Recreated: same name, new UID, its server not answering yet.
	recreated := newStaller(t).pod("team-a", "big-0")
	recreated.UID = "big-0-second"
	recreated.OwnerReferences = old.OwnerReferences
	recreated.Labels = old.Labels
	mu.Lock()
	pods = []*corev1.Pod{recreated}
	mu.Unlock()
	if r, ok := s.Reading(recreated, clk.Now()); ok {
		t.Fatalf("the recreated pod is served its namesake's reading %+v", r)
	}
}

// TestReadyAfterFirstPass: /readyz holds until every pod listed at the start has had its
// first attempt end, so an HPA never reads an adapter that has read nothing yet.
func TestReadyAfterFirstPass(t *testing.T) {
	quiet := newStaller(t)
	silent := quiet.pod("team-a", "silent")
	healthy := servingPod(t, "healthy", "llama", page(1))
	pods := []*corev1.Pod{silent, healthy}
	owners := owned(pods...)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s, err := New(Config{Period: time.Minute, Timeout: 300 * time.Millisecond, Concurrency: 2, Clock: clk, Owners: owners,
		Pods: func() ([]*corev1.Pod, error) { return pods, nil }}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err == nil {
		t.Fatal("ready before any pass")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	eventually(t, "ready", s.Ready)
	if quiet.accepted.Load() == 0 {
		t.Error("ready before the silent pod's first attempt")
	}
	if _, ok := s.Reading(healthy, clk.Now()); !ok {
		t.Error("ready before the healthy pod's reading")
	}
}

func TestPick(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	l := limitsOf(4, 0) // 4 answered reads, 2 a namespace; 16 reads of pods yet to answer, 2 a namespace
	if l != (limits{total: 4, namespace: 2, suspect: 16, namespaceSuspect: 2}) {
		t.Fatalf("limitsOf(4, 0) = %+v", l)
	}
	var cands []candidate
	for i := range 6 { // a tenant's silent pods, due longest
		cands = append(cands, candidate{uid: types.UID(fmt.Sprint("quiet-", i)), namespace: "quiet", due: at(-100 + i), class: failed})
	}
	for i := range 4 {
		cands = append(cands, candidate{uid: types.UID(fmt.Sprint("a-", i)), namespace: "a", due: at(-10 + i)})
	}
	cands = append(cands,
		candidate{uid: "b-running", namespace: "b", due: at(-50), running: true},
		candidate{uid: "b-0", namespace: "b", due: at(-1)},
		candidate{uid: "b-1", namespace: "b", due: at(-1)},
		candidate{uid: "new-quiet", namespace: "quiet", due: at(0), class: fresh},
		candidate{uid: "later", namespace: "c", due: at(7)},
		candidate{uid: "soon", namespace: "c", due: at(3)},
	)
	start, wakeAt := pick(cands, now, l)
	want := []types.UID{"a-0", "a-1", "b-0", "new-quiet", "quiet-0"}
	if fmt.Sprint(start) != fmt.Sprint(want) {
		t.Errorf("started %v, want %v (2 of a; 1 of b beside its running read, then the answered pool is full; the new pod before the silent ones; 2 of quiet)", start, want)
	}
	if !wakeAt.Equal(at(3)) {
		t.Errorf("wake at %v, want the next due %v", wakeAt, at(3))
	}
	if start, _ := pick(cands[:10], now, limits{total: 1, namespace: 1, suspect: 1, namespaceSuspect: 1}); fmt.Sprint(start) != "[a-0 quiet-0]" {
		t.Errorf("one slot a pool: started %v", start)
	}
}
