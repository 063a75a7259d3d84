package activator

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
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

// TestRulesUseRegisteredMetrics: every activator_ series the alerts of
// manifests/monitoring/rules.yaml read is one NewMetrics registers, so a renamed metric
// cannot leave an alert silently quiet.
func TestRulesUseRegisteredMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.setHeld(Key{Namespace: "a", Name: "b"}, 1)
	m.responses.WithLabelValues("200")
	m.coldStarted(0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, mf := range mfs {
		registered[mf.GetName()] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			registered[mf.GetName()+s] = true
		}
	}
	b, err := os.ReadFile("../../manifests/monitoring/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`\bactivator_[a-z_]+\b`).FindAllString(string(b), -1)
	if len(used) == 0 {
		t.Fatal("rules.yaml reads no activator_ series: its alerts are gone")
	}
	for _, name := range used {
		if !registered[name] {
			t.Errorf("rules.yaml reads %s, which the activator does not export", name)
		}
	}
}
