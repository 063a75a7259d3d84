// The aggregation layer: an API server on loopback, registered by an APIService, answers through
// the kube-apiserver and authenticates it by its front-proxy client certificate.

package cluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// requestHeaderAuth is what kube-system/extension-apiserver-authentication tells an aggregated
// API server about the aggregator, as sigs.k8s.io/custom-metrics-apiserver (k8s.io/apiserver's
// request-header authenticator) reads it.
type requestHeaderAuth struct {
	clientCA      *x509.CertPool
	allowedNames  []string
	userHeaders   []string
	groupHeaders  []string
	extraPrefixes []string
}

// seenRequest is one request as the test server authenticated it.
type seenRequest struct {
	path   string
	user   string // system:anonymous when the front-proxy certificate was missing or not trusted
	groups []string
	certCN string
}

// aggregatedServer is the smallest aggregated API server: it serves discovery for
// custom.metrics.k8s.io/v1beta1 and trusts the X-Remote-* headers only on a connection whose
// client certificate the request-header CA signed, for an allowed name; otherwise the caller is
// anonymous and forbidden, as the library answers.
type aggregatedServer struct {
	auth requestHeaderAuth
	mu   sync.Mutex
	seen []seenRequest
}

func (s *aggregatedServer) authenticate(r *http.Request) seenRequest {
	req := seenRequest{path: r.URL.Path, user: "system:anonymous"}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return req
	}
	leaf := r.TLS.VerifiedChains[0][0]
	req.certCN = leaf.Subject.CommonName
	if len(s.auth.allowedNames) > 0 && !slices.Contains(s.auth.allowedNames, req.certCN) {
		return req
	}
	for _, h := range s.auth.userHeaders {
		if v := r.Header.Get(h); v != "" {
			req.user = v
			break
		}
	}
	for _, h := range s.auth.groupHeaders {
		req.groups = append(req.groups, r.Header.Values(h)...)
	}
	return req
}

func (s *aggregatedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := s.authenticate(r)
	s.mu.Lock()
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if req.user == "system:anonymous" {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"forbidden: User \"system:anonymous\" cannot get path \"%s\""}`, r.URL.Path)
		return
	}
	switch r.URL.Path {
	case "/apis":
		fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[`+metricsGroup+`]}`)
	case "/apis/custom.metrics.k8s.io":
		fmt.Fprint(w, `{"kind":"APIGroup","apiVersion":"v1",`+strings.TrimPrefix(metricsGroup, "{"))
	case "/apis/custom.metrics.k8s.io/v1beta1":
		fmt.Fprint(w, metricsResources)
	default:
		http.NotFound(w, r)
	}
}

// seenBy returns the authenticated requests for path.
func (s *aggregatedServer) seenBy(path string) []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []seenRequest
	for _, r := range s.seen {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

func (s *aggregatedServer) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return "no request reached the test server"
	}
	r := s.seen[len(s.seen)-1]
	return fmt.Sprintf("%d requests; last %s as %q (client cert CN %q)", len(s.seen), r.path, r.user, r.certCN)
}

const metricsGroup = `{"name":"custom.metrics.k8s.io","versions":[{"groupVersion":"custom.metrics.k8s.io/v1beta1","version":"v1beta1"}],"preferredVersion":{"groupVersion":"custom.metrics.k8s.io/v1beta1","version":"v1beta1"}}`

const metricsResources = `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"custom.metrics.k8s.io/v1beta1","resources":[{"name":"pods/num_requests_waiting","singularName":"","namespaced":true,"kind":"MetricValueList","verbs":["get"]}]}`

// readRequestHeaderAuth reads the request-header keys the kube-apiserver publishes; a missing
// key is an error, and what is there is still returned, so the test can show what the
// aggregator does without it.
func readRequestHeaderAuth(t *testing.T) (requestHeaderAuth, []error) {
	t.Helper()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("extension-apiserver-authentication: %v", err)
	}
	var errs []error
	auth := requestHeaderAuth{clientCA: x509.NewCertPool()}
	if pemCA := cm.Data["requestheader-client-ca-file"]; pemCA == "" || !auth.clientCA.AppendCertsFromPEM([]byte(pemCA)) {
		errs = append(errs, fmt.Errorf("extension-apiserver-authentication has no requestheader-client-ca-file (keys: %v)", keys(cm.Data)))
	}
	for key, dst := range map[string]*[]string{
		"requestheader-allowed-names":        &auth.allowedNames,
		"requestheader-username-headers":     &auth.userHeaders,
		"requestheader-group-headers":        &auth.groupHeaders,
		"requestheader-extra-headers-prefix": &auth.extraPrefixes,
	} {
		v, ok := cm.Data[key]
		if !ok {
			errs = append(errs, fmt.Errorf("extension-apiserver-authentication has no %s", key))
			continue
		}
		if err := json.Unmarshal([]byte(v), dst); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: %w", key, v, err))
		}
	}
	return auth, errs
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// servingCert is a self-signed certificate for <svc>.<ns>.svc, the name the aggregator checks
// an APIService's backend against; its PEM is the APIService's caBundle.
func servingCert(t *testing.T, dnsName string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: dnsName},
		DNSNames:              []string{dnsName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// An aggregated API server on 127.0.0.1, behind an ExternalName Service and an APIService,
// answers `kubectl get --raw` through the kube-apiserver, which proves itself with the
// front-proxy client certificate and passes the caller on in X-Remote-User.
func TestAggregatedAPIThroughFrontProxy(t *testing.T) {
	ns := namespace(t)
	auth, errs := readRequestHeaderAuth(t)
	for _, err := range errs {
		// Go on: what the aggregator then sends is the finding.
		t.Error(err)
	}
	for _, check := range []struct {
		key       string
		got, want []string
	}{
		{"requestheader-allowed-names", auth.allowedNames, []string{"front-proxy-client"}},
		{"requestheader-username-headers", auth.userHeaders, []string{"X-Remote-User"}},
		{"requestheader-group-headers", auth.groupHeaders, []string{"X-Remote-Group"}},
		{"requestheader-extra-headers-prefix", auth.extraPrefixes, []string{"X-Remote-Extra-"}},
	} {
		if !slices.Equal(check.got, check.want) {
			t.Errorf("%s = %q, want %q", check.key, check.got, check.want)
		}
	}

	const svcName = "custom-metrics"
	cert, caBundle := servingCert(t, svcName+"."+ns+".svc")
	srv := &aggregatedServer{auth: auth}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ErrorLog: log.New(io.Discard, "", 0), TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert},
		// A certificate is asked for and checked against the request-header CA; without one
		// the caller is anonymous (403), as the library treats it.
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  auth.clientCA,
	}}
	// The availability check closes idle connections mid-handshake; those resets are noise.
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	apply(t, ns, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
spec:
  type: ExternalName
  externalName: 127.0.0.1
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.custom.metrics.k8s.io
spec:
  group: custom.metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: %s
  service:
    namespace: %s
    name: %s
    port: %d
`, svcName, base64.StdEncoding.EncodeToString(caBundle), ns, svcName, port))
	// Registered after the server's cleanup, so it runs first: an APIService left without its
	// backend would make every later discovery (and namespace deletion) in the package partial.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.Kubectl(ctx, "delete", "apiservice", "v1beta1.custom.metrics.k8s.io", "--ignore-not-found")
	})

	eventually(t, 60*time.Second, func() (bool, string) {
		out, _, err := c.Kubectl(context.Background(), "get", "apiservice", "v1beta1.custom.metrics.k8s.io", "-o",
			`jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].reason}: {.status.conditions[?(@.type=="Available")].message}`)
		return err == nil && strings.HasPrefix(out, "True "), fmt.Sprintf("Available %s %v; test server: %s", out, err, srv.last())
	})

	out := kubectl(t, "get", "--raw", "/apis/custom.metrics.k8s.io/v1beta1")
	var list struct {
		GroupVersion string `json:"groupVersion"`
		Resources    []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get --raw: %v: %s", err, out)
	}
	if list.GroupVersion != "custom.metrics.k8s.io/v1beta1" || len(list.Resources) != 1 || list.Resources[0].Name != "pods/num_requests_waiting" {
		t.Fatalf("kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1 = %s", out)
	}

	// kubectl's admin identity (CN kubernetes-admin, O system:masters) reached the server in
	// the request headers, over the front-proxy certificate.
	var callers []string
	found := false
	for _, r := range srv.seenBy("/apis/custom.metrics.k8s.io/v1beta1") {
		if who := fmt.Sprintf("%s%v via %q", r.user, r.groups, r.certCN); !slices.Contains(callers, who) {
			callers = append(callers, who)
		}
		if r.user == "kubernetes-admin" && r.certCN == "front-proxy-client" && slices.Contains(r.groups, "system:masters") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the test server never saw kubernetes-admin (system:masters) over the front-proxy certificate; it saw %v", callers)
	}
	t.Logf("the aggregated server saw: %v", callers)

	// The server is as strict as the library: the same headers from anyone but the front
	// proxy, even with a cluster client certificate, are refused.
	admin := c.RESTConfig()
	adminCert, err := tls.X509KeyPair(admin.CertData, admin.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caBundle)
	for name, certs := range map[string][]tls.Certificate{"no client certificate": nil, "the admin client certificate": {adminCert}} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, ServerName: svcName + "." + ns + ".svc", Certificates: certs,
		}}}
		req, err := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/apis/custom.metrics.k8s.io/v1beta1", port), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Remote-User", "kubernetes-admin")
		req.Header.Set("X-Remote-Group", "system:masters")
		resp, err := client.Do(req)
		switch {
		case err != nil && certs != nil && strings.Contains(err.Error(), "bad certificate"):
			// The TLS layer refused a certificate the request-header CA did not sign.
		case err != nil:
			t.Errorf("%s with X-Remote-User: %v, want 403 (or, with a certificate, bad certificate)", name, err)
		default:
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s with X-Remote-User: %s, want 403", name, resp.Status)
			}
		}
		client.CloseIdleConnections()
	}
}
