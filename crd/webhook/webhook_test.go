package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/crd"
)

// The handler over TLS with the generated certificate, verified with the CA alone, as the API
// server does with caBundle.
func TestConvertOverTLS(t *testing.T) {
	now := time.Now()
	certs, err := servingcert.EnsureDir(t.TempDir(), []string{"127.0.0.1", "svc.ns.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(ConvertHandler())
	if srv.TLS, err = certs.TLSConfig(); err != nil {
		t.Fatal(err)
	}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CA)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}}

	obj := `{"apiVersion":"ai.example.com/v1beta1","kind":"InferenceService","metadata":{"name":"a","namespace":"n"},"spec":{"baseModel":"m","adapters":[{"name":"x","storageURI":"hf://x"}],"replicas":2}}`
	review := apiextensionsv1.ConversionReview{
		Request: &apiextensionsv1.ConversionRequest{UID: types.UID("u1"), DesiredAPIVersion: "ai.example.com/v1alpha1", Objects: []runtime.RawExtension{{Raw: []byte(obj)}}},
	}
	review.APIVersion, review.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	body, _ := json.Marshal(review)
	resp, err := client.Post(srv.URL+crd.WebhookPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out apiextensionsv1.ConversionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.UID != "u1" || out.Response.Result.Status != "Success" || len(out.Response.ConvertedObjects) != 1 || out.Kind != "ConversionReview" {
		t.Fatalf("response %+v", out)
	}
	var a crd.InferenceService
	if err := json.Unmarshal(out.Response.ConvertedObjects[0].Raw, &a); err != nil {
		t.Fatal(err)
	}
	if a.APIVersion != "ai.example.com/v1alpha1" || a.Spec.Model != "m" || a.Spec.Replicas != 2 || a.Annotations[crd.AnnotationV1beta1Spec] == "" {
		t.Fatalf("converted %+v", a)
	}

	// A failure fails the whole review with the reason.
	bad := Review(&apiextensionsv1.ConversionRequest{UID: "u2", DesiredAPIVersion: "ai.example.com/v9", Objects: []runtime.RawExtension{{Raw: []byte(obj)}}})
	if bad.Result.Status != "Failure" || bad.Result.Message != `unsupported target apiVersion "ai.example.com/v9"` || bad.ConvertedObjects != nil {
		t.Fatalf("failure %+v", bad)
	}
}

func TestTransitionReporter(t *testing.T) {
	var gauge []bool
	var events []string
	r := &TransitionReporter{
		Gauge: func(up bool) { gauge = append(gauge, up) },
		Event: func(warning bool, reason, msg string) { events = append(events, fmt.Sprint(warning, " ", reason)) },
	}
	down := errors.New(`conversion webhook for ai.example.com/v1beta1, Kind=InferenceService failed: connection refused`)
	for _, err := range []error{nil, down, down, down, nil, nil, down} {
		r.ConversionProbe(err)
	}
	if fmt.Sprint(gauge) != "[true false false false true true false]" {
		t.Fatalf("gauge %v", gauge)
	}
	want := "[true ConversionWebhookFailing false ConversionWebhookRecovered true ConversionWebhookFailing]"
	if fmt.Sprint(events) != want {
		t.Fatalf("events %v, want one per change: %s", events, want)
	}
	if !IsConversionError(down) || IsConversionError(errors.New("connection refused")) {
		t.Fatal("IsConversionError")
	}
}
