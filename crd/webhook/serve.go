package webhook

import (
	"context"
	"crypto/tls"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/crd"
)

// Server makes or reuses the webhook's certificates in certDir, keeps their CA in the CRD's
// caBundle (checked every caSync until ctx ends) and returns the ConversionReview handler with
// its TLS configuration, for the caller to serve.
func Server(ctx context.Context, dyn dynamic.Interface, certDir string, caSync time.Duration) (http.Handler, *tls.Config, error) {
	svc := crd.WebhookServiceName + "." + crd.WebhookServiceNamespace + ".svc"
	certs, err := servingcert.EnsureDir(certDir, []string{"127.0.0.1", svc, svc + ".cluster.local"}, time.Now())
	if err != nil {
		return nil, nil, err
	}
	tlsCfg, err := certs.TLSConfig()
	if err != nil {
		return nil, nil, err
	}
	go SyncCABundle(ctx, dyn, certs.CA, caSync)
	mux := http.NewServeMux()
	mux.Handle(crd.WebhookPath, ConvertHandler())
	return mux, tlsCfg, nil
}

// RunReportingProbe runs the probe every period in the version the operator does not watch,
// as users' reads in that version do, until ctx ends: gauge gets each outcome, and each change
// is an Event on the CRD (kubectl describe crd inferenceservices.ai.example.com).
func RunReportingProbe(ctx context.Context, dyn dynamic.Interface, namespace, watched string, period time.Duration, gauge func(up bool), rec events.EventRecorder) {
	other := crd.VersionV1beta1
	if watched == crd.VersionV1beta1 {
		other = crd.Version
	}
	r := &TransitionReporter{
		Gauge: gauge,
		Event: func(warning bool, reason, msg string) {
			obj, err := CRDObject(ctx, dyn)
			if err != nil {
				klog.ErrorS(err, "Cannot record the conversion probe's event", "reason", reason)
				return
			}
			typ := corev1.EventTypeNormal
			if warning {
				typ = corev1.EventTypeWarning
			}
			rec.Eventf(obj, nil, typ, reason, "Convert", "%s", msg)
		},
	}
	RunProbe(ctx, dyn, namespace, other, period, r)
}
