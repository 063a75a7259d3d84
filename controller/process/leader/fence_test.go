package leader

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// stubLock accepts or refuses every write of the Lease record.
type stubLock struct {
	resourcelock.Interface
	err error
}

func (l stubLock) Identity() string { return "me" }
func (l stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.err
}
func (l stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.err
}

func TestWriteFence(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	renew := func(holder string, at time.Duration, err error) func(*Fence) {
		return func(f *Fence) {
			l := fencedLock{Interface: stubLock{err: err}, f: f}
			_ = l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: holder, RenewTime: metav1.NewTime(t0.Add(at))})
		}
	}
	for _, tc := range []struct {
		name    string
		history []func(*Fence)
		now     time.Duration // since t0
		method  string
		allowed bool
	}{
		{"never led: reads pass", nil, 0, http.MethodGet, true},
		{"never led: a create is refused", nil, 0, http.MethodPost, false},
		{"renewed 1s ago: update", []func(*Fence){renew("me", 0, nil)}, time.Second, http.MethodPut, true},
		{"renewed 1s ago: patch", []func(*Fence){renew("me", 0, nil)}, time.Second, http.MethodPatch, true},
		{"renewed 1s ago: delete", []func(*Fence){renew("me", 0, nil)}, time.Second, http.MethodDelete, true},
		{"just under the deadline", []func(*Fence){renew("me", 0, nil)}, 3*time.Second - time.Nanosecond, http.MethodPost, true},
		{"at the deadline", []func(*Fence){renew("me", 0, nil)}, 3 * time.Second, http.MethodPost, false},
		{"paused past the deadline: update", []func(*Fence){renew("me", 0, nil)}, 10 * time.Second, http.MethodPut, false},
		{"paused past the deadline: delete", []func(*Fence){renew("me", 0, nil)}, 10 * time.Second, http.MethodDelete, false},
		{"paused past the deadline: reads pass", []func(*Fence){renew("me", 0, nil)}, 10 * time.Second, http.MethodGet, true},
		{"a failed renew does not extend", []func(*Fence){renew("me", 0, nil), renew("me", 5*time.Second, errors.New("conflict"))}, 6 * time.Second, http.MethodPost, false},
		{"a later renew extends", []func(*Fence){renew("me", 0, nil), renew("me", 5*time.Second, nil)}, 6 * time.Second, http.MethodPost, true},
		{"released", []func(*Fence){renew("me", 0, nil), renew("", time.Second, nil)}, 2 * time.Second, http.MethodPost, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused := 0
			f := NewFence(3*time.Second, func() { refused++ })
			f.now = func() time.Time { return t0.Add(tc.now) }
			for _, h := range tc.history {
				h(f)
			}
			sent := 0
			rt := f.Wrap(roundTripFunc(func(*http.Request) (*http.Response, error) {
				sent++
				return &http.Response{StatusCode: http.StatusOK}, nil
			}))
			req, _ := http.NewRequest(tc.method, "https://127.0.0.1/api/v1/namespaces/a/services/b", nil)
			_, err := rt.RoundTrip(req)
			if tc.allowed != (err == nil) || tc.allowed != (sent == 1) {
				t.Fatalf("allowed %v: err %v, sent %d", tc.allowed, err, sent)
			}
			wantFenced := 0
			if !tc.allowed {
				wantFenced = 1
				if !strings.Contains(err.Error(), "write fenced") {
					t.Fatalf("error %v", err)
				}
			}
			if refused != wantFenced {
				t.Fatalf("refusals counted %d, want %d", refused, wantFenced)
			}
		})
	}
}
