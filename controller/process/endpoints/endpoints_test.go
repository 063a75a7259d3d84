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
	mux := Probes(func(*http.Request) error { return healthy }, func() bool { return synced }, false)
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
	if code, _ := get(t, Probes(func(*http.Request) error { return nil }, func() bool { return true }, true), "/debug/pprof/"); code != http.StatusOK {
		t.Fatalf("pprof with --pprof: %d", code)
	}
}

func TestListenServesAndShutsDown(t *testing.T) {
	srv := Listen("127.0.0.1:0", Metrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") })), "metrics", nil)
	Shutdown(srv)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("server still usable after Shutdown: %v", err)
	}
}
