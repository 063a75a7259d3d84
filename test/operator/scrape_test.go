package operator

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestScrape reads a text endpoint into families SumCounter sums, and names a refusal's status.
func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"a\"} 2\nvllm:num_requests_waiting{model_name=\"b\"} 3\n"))
	}))
	defer srv.Close()
	fams, err := Scrape(nil, srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := SumCounter(fams, "vllm:num_requests_waiting", nil); got != 5 {
		t.Errorf("sum %v, want 5", got)
	}
	if _, err := Scrape(srv.Client(), srv.URL+"/other"); err == nil || !strings.Contains(err.Error(), "GET /metrics: 403 Forbidden") {
		t.Errorf("a refusal: %v", err)
	}
}
