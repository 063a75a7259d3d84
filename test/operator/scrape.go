package operator

// Reading a Prometheus text endpoint, the one way every suite and tool does it: the operator's,
// the metrics adapter's, the fake vLLM's and KServe's /metrics, the API server's.

import (
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeClient is Scrape's client when none is given: every endpoint is on loopback, never
// behind a proxy.
var scrapeClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}

// Scrape GETs url (a /metrics endpoint) with client (nil: a loopback client bounded at 10 s)
// and parses the text format into families by name, as SumCounter reads them. A status other
// than 200 is an error naming it.
func Scrape(client *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	if client == nil {
		client = scrapeClient
	}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics parses Prometheus' text format (UTF-8 names, as the client libraries write
// them) into families by name.
func ParseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}
