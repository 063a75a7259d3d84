package testenv

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// TestLoad sends completions round robin to the pods it is given until its bound, counts
// what failed and tells each failure with the answer's start.
func TestLoad(t *testing.T) {
	var ips []string
	var served [2]atomic.Int64
	for i := range 2 {
		ip := "127.93.0." + strconv.Itoa(i+1) // a model pod's port on its own loopback address
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(reconcile.Port)))
		if err != nil {
			t.Skipf("loopback %s: %v", ip, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.URL.Path != "/v1/completions" || r.Header.Get("Content-Type") != "application/json" {
				http.Error(w, "wrong request", http.StatusBadRequest)
				return
			}
			if served[i].Add(1); i == 1 {
				http.Error(w, "the engine's waiting queue is full", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte(`{"choices":[{"text":"ok"}]}`))
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		ips = append(ips, ip)
	}
	var mu sync.Mutex
	var failures []string
	l := StartLoad(context.Background(), LoadOptions{Clients: 3, Body: `{"model":"m","prompt":"p","max_tokens":1}`, MaxSent: 40,
		IPs: func() []string { return ips },
		OnFailure: func(err error, others int) {
			mu.Lock()
			defer mu.Unlock()
			if others != 1 {
				t.Errorf("others %d, want 1", others)
			}
			failures = append(failures, err.Error())
		}})
	l.Wait()
	sent, failed := l.Stop()
	if sent < 40 || sent > 42 { // each client checks the bound before it sends
		t.Errorf("sent %d, want 40 (at most one more per client)", sent)
	}
	if ok, bad := served[0].Load(), served[1].Load(); ok+bad != sent || bad != failed || ok == 0 || bad == 0 {
		t.Errorf("served %d and %d, sent %d, failed %d: want round robin over both", ok, bad, sent, failed)
	}
	if len(failures) != int(failed) || len(failures) == 0 || !strings.HasPrefix(failures[0], "503 Service Unavailable: the engine's waiting queue is full") {
		t.Errorf("failures %d (%d counted): %q", len(failures), failed, failures)
	}
}
