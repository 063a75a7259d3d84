package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
)

// The handler over TLS with the generated certificate, verified with the CA alone, as the API
// server does with caBundle.
func TestConvertOverTLS(t *testing.T) {
	now := time.Now()
	certs, err := EnsureCerts(t.TempDir(), []string{"127.0.0.1", "svc.ns.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(ConvertHandler())
	srv.TLS = certs.TLSConfig()
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
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

func TestEnsureCertsReusesValid(t *testing.T) {
	dir, now := t.TempDir(), time.Now()
	hosts := []string{"127.0.0.1", "svc.ns.svc"}
	a, err := EnsureCerts(dir, hosts, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EnsureCerts(dir, hosts, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CAPEM, b.CAPEM) {
		t.Fatal("a valid CA was replaced")
	}
	c, err := EnsureCerts(dir, hosts, now.Add(certValidity-renewBefore+time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.CAPEM, c.CAPEM) {
		t.Fatal("a CA about to expire was kept")
	}
	d, err := EnsureCerts(dir, append(hosts, "other.svc"), now)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c.CAPEM, d.CAPEM) {
		t.Fatal("a certificate missing a host was kept")
	}
}

func TestMergeBundle(t *testing.T) {
	now := time.Now()
	var cas [][]byte
	for i := 0; i < 6; i++ {
		c, err := EnsureCerts(t.TempDir(), []string{"127.0.0.1"}, now)
		if err != nil {
			t.Fatal(err)
		}
		cas = append(cas, c.CAPEM)
	}
	count := func(b []byte) int {
		n := 0
		for {
			var blk *pem.Block
			if blk, b = pem.Decode(b); blk == nil {
				return n
			}
			n++
		}
	}
	b := MergeBundle(nil, cas[0], now)
	if !bytes.Equal(b, cas[0]) {
		t.Fatal("empty bundle: want just the CA")
	}
	if got := MergeBundle(b, cas[0], now); !bytes.Equal(got, b) {
		t.Fatal("a CA already present was added again")
	}
	b = MergeBundle(b, cas[1], now) // a second replica
	if count(b) != 2 || !bytes.Contains(b, cas[0]) || !bytes.Contains(b, cas[1]) {
		t.Fatal("want both replicas' CAs")
	}
	for _, ca := range cas[2:] {
		b = MergeBundle(b, ca, now)
	}
	if count(b) != maxBundleCAs || !bytes.HasSuffix(b, cas[5]) || bytes.Contains(b, cas[0]) {
		t.Fatalf("want the %d newest CAs, %d kept", maxBundleCAs, count(b))
	}
	if got := MergeBundle(append([]byte("garbage"), b...), cas[5], now.Add(2*certValidity)); !bytes.Equal(got, cas[5]) {
		t.Fatal("expired and unreadable entries were kept")
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
