package webhook

import (
	"context"
	"errors"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/crd"
)

// Event reasons on the CRD when conversions through the API server start or stop failing.
const (
	ReasonConversionFailing   = "ConversionWebhookFailing"
	ReasonConversionRecovered = "ConversionWebhookRecovered"
)

// Reporter receives each probe's outcome; the operator turns it into a gauge and, on a change,
// an Event on the CRD (kubectl describe crd inferenceservices.ai.example.com).
type Reporter interface {
	ConversionProbe(err error)
}

// Probe asks the API server for one InferenceService in version (the one the operator does not
// store in), so the server must convert through the webhook the way users' reads do. A list
// with nothing to convert succeeds: nothing is failing then. Only conversion failures count;
// other errors (the API server itself down) are returned as they are for the caller to log.
func Probe(ctx context.Context, dyn dynamic.Interface, namespace, version string) error {
	r := dyn.Resource(schema.GroupVersionResource{Group: crd.Group, Version: version, Resource: crd.Plural})
	_, err := r.Namespace(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	return err
}

// IsConversionError tells a failed conversion (what the webhook is responsible for) from any
// other API error, by the API server's message.
func IsConversionError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "conversion webhook for")
}

// RunProbe probes every period until ctx is done and reports each outcome; a failing
// conversion is reported with the API server's own message, which names the webhook and why.
func RunProbe(ctx context.Context, dyn dynamic.Interface, namespace, version string, period time.Duration, r Reporter) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		err := Probe(ctx, dyn, namespace, version)
		switch {
		case err == nil:
			r.ConversionProbe(nil)
		case IsConversionError(err):
			klog.ErrorS(err, "Conversion through the API server fails", "crd", crd.CRDName)
			r.ConversionProbe(err)
		case errors.Is(err, context.Canceled):
		default:
			klog.V(2).InfoS("Conversion probe could not ask the API server", "err", err)
		}
	}, period)
}

// CRDObject is the InferenceService CRD as an object Events can be about.
func CRDObject(ctx context.Context, dyn dynamic.Interface) (*unstructured.Unstructured, error) {
	return dyn.Resource(crd.CRDResource).Get(ctx, crd.CRDName, metav1.GetOptions{})
}

// TransitionReporter turns probe outcomes into a gauge on every probe and an Event only when
// the outcome changes, so a long outage is one Warning, not one per period.
type TransitionReporter struct {
	Gauge func(up bool)
	// Event records on the CRD; warning is false for the recovery.
	Event func(warning bool, reason, message string)
	state int // 0 unknown, 1 up, -1 failing
}

// ConversionProbe implements Reporter.
func (t *TransitionReporter) ConversionProbe(err error) {
	t.Gauge(err == nil)
	switch {
	case err != nil && t.state != -1:
		t.state = -1
		t.Event(true, ReasonConversionFailing, "InferenceServices cannot be converted between versions: "+err.Error())
	case err == nil && t.state == -1:
		t.state = 1
		t.Event(false, ReasonConversionRecovered, "conversions through the API server succeed again")
	case err == nil:
		t.state = 1
	}
}
