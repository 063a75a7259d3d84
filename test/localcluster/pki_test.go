package main

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The front-proxy client certificate chains to its own CA and not to the cluster CA: an
// aggregated API server trusts X-Remote-User from it alone, so a cluster client certificate
// must not pass as one.
func TestPKIFrontProxyClientChainsToItsOwnCA(t *testing.T) {
	p, err := ensurePKI(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	fpCA, _, err := loadPair(p.frontProxyCACert, p.frontProxyCAKey)
	if err != nil {
		t.Fatal(err)
	}
	client, _, err := loadPair(p.frontProxyClientCert, p.frontProxyClientKey)
	if err != nil {
		t.Fatal(err)
	}
	if client.Subject.CommonName != frontProxyClientCN {
		t.Errorf("front-proxy client CN = %q, want %q", client.Subject.CommonName, frontProxyClientCN)
	}
	verify := func(root *x509.Certificate) error {
		roots := x509.NewCertPool()
		roots.AddCert(root)
		_, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verify(fpCA); err != nil {
		t.Errorf("front-proxy client does not verify against the front-proxy CA: %v", err)
	}
	if err := verify(p.caCertParsed); err == nil {
		t.Errorf("front-proxy client verifies against the cluster CA; it must have its own")
	}
	if bytes.Equal(fpCA.Raw, p.caCertParsed.Raw) {
		t.Errorf("front-proxy CA is the cluster CA")
	}
	admin, _, err := loadPair(p.clientPaths("admin"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(fpCA)
	if _, err := admin.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Errorf("the admin certificate verifies against the front-proxy CA")
	}
}

// A restart on the same data directory keeps the front-proxy credentials, and a data
// directory from before them gains them.
func TestPKIFrontProxyPersistsAndIsAddedToOldDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	p, err := ensurePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{p.frontProxyCACert, p.frontProxyCAKey, p.frontProxyClientCert, p.frontProxyClientKey, p.caCert}
	read := func() [][]byte {
		var out [][]byte
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	before := read()
	if _, err := ensurePKI(dir); err != nil {
		t.Fatal(err)
	}
	if after := read(); !slices.EqualFunc(before, after, bytes.Equal) {
		t.Errorf("ensurePKI on the same directory rewrote the front-proxy files")
	}
	for _, f := range files[:4] {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ensurePKI(dir); err != nil {
		t.Fatal(err)
	}
	after := read()
	for i, f := range files[:4] {
		if len(after[i]) == 0 {
			t.Errorf("%s not recreated", f)
		}
	}
	if !bytes.Equal(before[4], after[4]) {
		t.Errorf("adding the front proxy changed the cluster CA")
	}
}

// The kube-apiserver flags are the ones a kubeadm cluster sets, and routing to endpoints
// stays off.
func TestAggregatorArgs(t *testing.T) {
	p, err := ensurePKI(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	got := p.aggregatorArgs()
	want := []string{
		"--requestheader-client-ca-file=" + p.frontProxyCACert,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=" + p.frontProxyClientCert,
		"--proxy-client-key-file=" + p.frontProxyClientKey,
	}
	if !slices.Equal(got, want) {
		t.Errorf("aggregatorArgs:\n got %q\nwant %q", got, want)
	}
	for _, a := range got {
		if strings.HasPrefix(a, "--enable-aggregator-routing") {
			t.Errorf("aggregatorArgs sets %s", a)
		}
	}
}
