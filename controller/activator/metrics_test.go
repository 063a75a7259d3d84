package activator

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestInstrumentCountsByCode: every answer is counted by its code, a streamed one keeps its
// per-write flush through the counter's wrapper (the proxy flushes each token), and a nil
// *Metrics leaves the handler as it is.
func TestInstrumentCountsByCode(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	flushed := false
	h := m.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			writeError(w, http.StatusBadGateway, "BadGateway", "model server did not answer", 0)
			return
		}
		_, _ = w.Write([]byte("data: 1\n\n"))
		flushed = http.NewResponseController(w).Flush() == nil
	}))
	for _, p := range []string{"/down", "/ok", "/ok"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, p, nil))
	}
	if !flushed {
		t.Error("a streamed response could not be flushed through the counter")
	}
	for code, want := range map[string]float64{"502": 1, "200": 2} {
		if got := testutil.ToFloat64(m.responses.WithLabelValues(code)); got != want {
			t.Errorf("activator_responses_total{code=%q} %v, want %v", code, got, want)
		}
	}
	var none *Metrics
	inner := http.NotFoundHandler()
	if got := none.Instrument(inner); got == nil {
		t.Error("a nil *Metrics dropped the handler")
	}
}
