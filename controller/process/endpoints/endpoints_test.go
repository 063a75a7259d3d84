package endpoints

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestProbes(t *testing.T) {
	synced, healthy := false, errors.New("leader lease not renewed")
	mux := Probes(func(*http.Request) error { return healthy }, Synced(func() bool { return synced }), false)
	if code, body := get(t, mux, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not synced") {
		t.Fatalf("readyz before sync: %d %q", code, body)
	}
	if code, body := get(t, mux, "/healthz"); code != http.StatusInternalServerError || !strings.Contains(body, "lease") {
		t.Fatalf("healthz of a wedged leader: %d %q", code, body)
	}
	synced, healthy = true, nil
	for _, p := range []string{"/readyz", "/healthz"} {
		if code, _ := get(t, mux, p); code != http.StatusOK {
			t.Fatalf("%s: %d", p, code)
		}
	}
	if code, _ := get(t, mux, "/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("pprof served without --pprof: %d", code)
	}
	if code, _ := get(t, Probes(nil, Synced(func() bool { return true }), true), "/debug/pprof/"); code != http.StatusOK {
		t.Fatalf("pprof with --pprof: %d", code)
	}
}

// An activator that is shutting down says why it is not ready; nil healthz is always healthy.
func TestProbesReadiness(t *testing.T) {
	var why error = errors.New("shutting down")
	mux := Probes(nil, func() error { return why }, false)
	if code, body := get(t, mux, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("readyz while shutting down: %d %q", code, body)
	}
	if code, _ := get(t, mux, "/healthz"); code != http.StatusOK {
		t.Fatalf("healthz without a check: %d", code)
	}
	why = nil
	if code, _ := get(t, mux, "/readyz"); code != http.StatusOK {
		t.Fatalf("readyz once ready: %d", code)
	}
}

func TestNewRegistryHasTheProcessCollectors(t *testing.T) {
	fams, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range fams {
		have[f.GetName()] = true
	}
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if !have[want] {
			t.Errorf("no %s in a new registry", want)
		}
	}
}

func TestListenServesAndShutsDown(t *testing.T) {
	srv := Listen("127.0.0.1:0", Metrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") })), "metrics", nil)
	Shutdown(srv)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("server still usable after Shutdown: %v", err)
	}
}
