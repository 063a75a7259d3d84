package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestTimeoutsBound(t *testing.T) {
	d := func(s string) *time.Duration { v, _ := time.ParseDuration(s); return &v }
	for _, tc := range []struct {
		t    Timeouts
		want time.Duration
	}{
		{Timeouts{}, DefaultRouteTimeout},
		{Timeouts{Request: d("300s")}, 300 * time.Second},
		{Timeouts{Request: d("0s")}, 0},
		{Timeouts{Request: d("300s"), BackendRequest: d("20s")}, 20 * time.Second},
		{Timeouts{BackendRequest: d("60s")}, DefaultRouteTimeout},
		{Timeouts{Request: d("0s"), BackendRequest: d("60s")}, 60 * time.Second},
	} {
		if got := tc.t.Bound(DefaultRouteTimeout); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.t, got, tc.want)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "ns", "name": "r"}, "spec": map[string]any{"rules": []any{
		map[string]any{"timeouts": map[string]any{"request": "300s", "backendRequest": "1m"}, "matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/a"}}}},
	}}}}
	rs := Rules(u)
	if len(rs) != 1 || rs[0].Timeouts.Bound(DefaultRouteTimeout) != time.Minute || *rs[0].Timeouts.Request != 300*time.Second {
		t.Fatalf("rules %+v", rs)
	}
}

// TestForwardTimeout: a response whose headers come after the route timeout is Envoy's 504
// "upstream request timeout"; a stream that outlasts it is cut (no clean end); within it, whole.
func TestForwardTimeout(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delay, _ := time.ParseDuration(r.URL.Query().Get("headers"))
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusOK)
		for i := range 20 {
			_, _ = io.WriteString(w, "data: token\n\n")
			w.(http.Flusher).Flush()
			if r.URL.Query().Get("stream") != "" && i < 19 {
				select {
				case <-time.After(20 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	defer up.Close()
	g := newGateway(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, "gw", "gw", newMetrics(prometheus.NewRegistry()), nil, DefaultRouteTimeout, time.Second)
	endpoint := strings.TrimPrefix(up.URL, "http://")
	front := func(timeout time.Duration) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			g.forward(w, r, "Service", endpoint, r.URL.Path, nil, nil, timeout)
		}))
	}
	get := func(srv *httptest.Server, q string) (int, string, error) {
		res, err := http.Get(srv.URL + "/v1/completions?" + q)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	short := front(100 * time.Millisecond)
	defer short.Close()
	if code, body, err := get(short, "headers=1s"); code != http.StatusGatewayTimeout || body != UpstreamTimeoutBody || err != nil {
		t.Errorf("headers late: %d %q %v", code, body, err)
	}
	if code, body, err := get(short, "stream=1"); code != http.StatusOK || err == nil || strings.Count(body, "data:") == 20 {
		t.Errorf("stream longer than the timeout: %d, %d events, %v: want the stream cut", code, strings.Count(body, "data:"), err)
	}
	long := front(10 * time.Second)
	defer long.Close()
	if code, body, err := get(long, "stream=1"); code != http.StatusOK || err != nil || strings.Count(body, "data:") != 20 {
		t.Errorf("stream within the timeout: %d, %d events, %v", code, strings.Count(body, "data:"), err)
	}
	off := front(0)
	defer off.Close()
	if code, _, err := get(off, "headers=300ms"); code != http.StatusOK || err != nil {
		t.Errorf("timeout off: %d %v", code, err)
	}
}
