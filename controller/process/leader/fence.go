package leader

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Fence keeps a leader that was paused past its Lease (SIGSTOP, a long GC or VM pause)
// from writing once it resumes: client-go only tells it that it lost the Lease on its next
// renew attempt, while its workers resume at the same instant, mid-reconcile. Every mutating
// request of the controller's clients is refused unless this replica's last successful renewal
// started less than the renew deadline ago, which is before any other replica can see the
// Lease as expired (lease duration > renew deadline). A request that passed the check can
// still be delayed in flight; the margin is lease duration minus renew deadline.
type Fence struct {
	deadline time.Duration
	now      func() time.Time
	refused  func() // counts a refused write

	mu      sync.Mutex
	renewed time.Time // RenewTime of our last successful acquire or renew; zero when not leading
}

// NewFence builds the fence for a renew deadline; refused is called for each write it refuses.
func NewFence(deadline time.Duration, refused func()) *Fence {
	return &Fence{deadline: deadline, now: time.Now, refused: refused}
}

// allow says whether a request may go out now; reads always may.
func (f *Fence) allow(method string) (bool, time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true, 0
	}
	f.mu.Lock()
	renewed := f.renewed
	f.mu.Unlock()
	if renewed.IsZero() {
		return false, -1
	}
	age := f.now().Sub(renewed)
	return age < f.deadline, age
}

// observe records a successful write of the Lease record by this replica.
func (f *Fence) observe(identity string, ler resourcelock.LeaderElectionRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ler.HolderIdentity != identity {
		f.renewed = time.Time{} // released
		return
	}
	f.renewed = ler.RenewTime.Time
}

// Wrap is a rest.Config WrapTransport: the fenced round tripper.
func (f *Fence) Wrap(rt http.RoundTripper) http.RoundTripper {
	return fencedTransport{f: f, next: rt}
}

type fencedTransport struct {
	f    *Fence
	next http.RoundTripper
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if ok, age := t.f.allow(req.Method); !ok {
		t.f.refused()
		klog.V(1).InfoS("Refused a write: not a current leader", "method", req.Method, "path", req.URL.Path, "sinceRenew", age, "renewDeadline", t.f.deadline)
		// A plain error: the queue backs off and retries, as on any failed write.
		return nil, fmt.Errorf("write fenced: leader lease last renewed %v ago, renew deadline %v", age, t.f.deadline)
	}
	return t.next.RoundTrip(req)
}

// fencedLock is the Lease lock reporting each successful acquire or renew to the fence.
type fencedLock struct {
	resourcelock.Interface
	f *Fence
}

func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.f.observe(l.Identity(), ler)
	}
	return err
}

func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	if err == nil {
		l.f.observe(l.Identity(), ler)
	}
	return err
}
