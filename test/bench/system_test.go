package main

import (
	"bytes"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// TestKServeSystem checks how a KServe model is read: its children by the -predictor suffix,
// Ready from its Ready condition, its Events by source component and count.
func TestKServeSystem(t *testing.T) {
	k, err := systemNamed("kserve")
	if err != nil {
		t.Fatal(err)
	}
	for child, want := range map[string]string{"m-00001-predictor": "m-00001", "m-00001": "", "kserve-webhook-server-service": ""} {
		if got := k.model(child); got != want {
			t.Errorf("model(%q) = %q, want %q", child, got, want)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"observedGeneration": int64(2),
		"conditions": []any{
			map[string]any{"type": "PredictorReady", "status": "True"},
			map[string]any{"type": "Ready", "status": "False"},
		},
	}}}
	if ready, gen := k.ready(u); ready || gen != 2 {
		t.Errorf("ready = %v, %d; want false, 2", ready, gen)
	}
	u.Object["status"].(map[string]any)["conditions"].([]any)[1].(map[string]any)["status"] = "True"
	if ready, _ := k.ready(u); !ready {
		t.Error("Ready=True not read as ready")
	}
	ev := &eventsv1.Event{DeprecatedSource: corev1.EventSource{Component: "v1beta1Controllers"}, DeprecatedCount: 3}
	if got := k.eventWrites(ev); got != 3 {
		t.Errorf("eventWrites = %v, want 3 (a create and two count patches)", got)
	}
	if got := k.eventWrites(&eventsv1.Event{ReportingController: "inferenceservice-operator"}); got != 0 {
		t.Errorf("another controller's Event counted: %v", got)
	}
	o, _ := systemNamed("")
	if got := o.eventWrites(&eventsv1.Event{ReportingController: "inferenceservice-operator", Series: &eventsv1.EventSeries{Count: 4}}); got != 4 {
		t.Errorf("operator eventWrites = %v, want 4", got)
	}
	if _, err := systemNamed("knative"); err == nil {
		t.Error("unknown system accepted")
	}
}

// TestHistogramQuantileSeries checks that the quantile is read from the selected series.
func TestHistogramQuantileSeries(t *testing.T) {
	series := func(controller string, upper float64) *dto.Metric {
		return &dto.Metric{Label: []*dto.LabelPair{{Name: ptr.To("controller"), Value: ptr.To(controller)}},
			Histogram: &dto.Histogram{SampleCount: ptr.To[uint64](10), Bucket: []*dto.Bucket{{UpperBound: ptr.To(upper), CumulativeCount: ptr.To[uint64](10)}}}}
	}
	fams := map[string]*dto.MetricFamily{"h": {Metric: []*dto.Metric{series("trainedmodel", 8), series("inferenceservice", 2)}}}
	if got := histogramQuantile(fams, "h", nil, 1); got != 8 {
		t.Errorf("any series: %v, want the first's 8", got)
	}
	if got := histogramQuantile(fams, "h", func(l map[string]string) bool { return l["controller"] == "inferenceservice" }, 1); got != 2 {
		t.Errorf("inferenceservice series: %v, want 2", got)
	}
}

// TestPrintRatios checks the side-by-side line: KServe over the operator at the same N.
func TestPrintRatios(t *testing.T) {
	var out bytes.Buffer
	PrintTable(&out, []Result{
		{System: SystemOperator, N: 100, WritesPerISVCCreate: 4, RSSMiB: 20},
		{System: SystemKServe, N: 100, WritesPerISVCCreate: 6, RSSMiB: 50, WritesSteady: 3},
	})
	lines := strings.Split(out.String(), "\n")
	var ratio string
	for i, l := range lines {
		if strings.Contains(l, "kserve/operator") && i+1 < len(lines) {
			ratio = lines[i+1]
		}
	}
	if f := strings.Fields(ratio); len(f) < 6 || f[0] != "100" || f[1] != "1.50" || f[2] != "3/0" || f[5] != "2.50" {
		t.Errorf("ratio line %q, want 100 1.50 3/0 ... 2.50\n%s", ratio, out.String())
	}
}
