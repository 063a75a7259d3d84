package servingcert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A directory's pair is reused while it serves every host; a certificate due for renewal is
// reissued under the same CA, a CA that cannot outlive a new certificate is replaced, and a new
// host gets a new certificate.
func TestEnsureDir(t *testing.T) {
	dir, now := t.TempDir(), time.Now()
	hosts := []string{"127.0.0.1", "svc.ns.svc"}
	a, err := EnsureDir(dir, hosts, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CAFile, CAKeyFile, CertFile, KeyFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
	}
	b, err := EnsureDir(dir, hosts, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CA, b.CA) || !bytes.Equal(a.Cert, b.Cert) {
		t.Fatal("a valid pair was replaced")
	}
	due := now.Add(CertLife - RenewBefore + time.Hour)
	c, err := EnsureDir(dir, hosts, due)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Cert, c.Cert) || !bytes.Equal(a.CA, c.CA) {
		t.Fatal("a certificate due for renewal: want a new one under the same CA (the caBundle stays)")
	}
	if why := Valid(c, due, hosts); why != "" {
		t.Fatalf("renewed pair: %s", why)
	}
	d, err := EnsureDir(dir, append(hosts, "other.svc"), due)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c.Cert, d.Cert) {
		t.Fatal("a certificate missing a host was kept")
	}
	late := now.Add(CALife - CertLife + time.Hour)
	e, err := EnsureDir(dir, hosts, late)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.CA, e.CA) {
		t.Fatal("a CA expiring before a new certificate would was kept")
	}
	// What was written is what the next start reads.
	f, err := EnsureDir(dir, hosts, late)
	if err != nil || !bytes.Equal(e.CA, f.CA) || !bytes.Equal(e.Cert, f.Cert) {
		t.Fatalf("reread: %v", err)
	}
}

// A file that is not a certificate (a half-written or foreign one) is replaced, never served.
func TestEnsureDirReplacesGarbage(t *testing.T) {
	dir, now := t.TempDir(), time.Now()
	if err := os.WriteFile(filepath.Join(dir, CertFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := EnsureDir(dir, []string{"svc.ns.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if why := Valid(p, now, []string{"svc.ns.svc"}); why != "" {
		t.Fatal(why)
	}
}

// An IP host is an IP SAN: a client verifying with the CA alone reaches 127.0.0.1, as the API
// server does a webhook registered by URL.
func TestTLSConfigServesIPHost(t *testing.T) {
	p, err := EnsureDir(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	// httptest listens on 127.0.0.1.
	if srv.TLS, err = p.TLSConfig(); err != nil {
		t.Fatal(err)
	}
	srv.StartTLS()
	defer srv.Close()
	if host, _, _ := net.SplitHostPort(srv.Listener.Addr().String()); host != "127.0.0.1" {
		t.Skipf("listening on %s", host)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.CA)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := (Pair{}).TLSConfig(); err == nil {
		t.Fatal("an empty pair made a TLS config")
	}
}

func TestMergeBundle(t *testing.T) {
	now := time.Now()
	var cas [][]byte
	for i := 0; i < 6; i++ {
		c, err := EnsureDir(t.TempDir(), []string{"127.0.0.1"}, now)
		if err != nil {
			t.Fatal(err)
		}
		cas = append(cas, c.CA)
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
	if count(b) != MaxBundleCAs || !bytes.HasSuffix(b, cas[5]) || bytes.Contains(b, cas[0]) {
		t.Fatalf("want the %d newest CAs, %d kept", MaxBundleCAs, count(b))
	}
	if got := MergeBundle(append([]byte("garbage"), b...), cas[5], now.Add(2*CALife)); !bytes.Equal(got, cas[5]) {
		t.Fatal("expired and unreadable entries were kept")
	}
}
