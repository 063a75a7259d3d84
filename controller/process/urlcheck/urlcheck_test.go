package urlcheck

import (
	"bytes"
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

// check runs Main with args and returns its exit code and what it printed.
func check(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, &out, &errOut)
	return code, out.String() + errOut.String()
}

// refusedURL is an address nothing listens on: a port just freed.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/readyz"
}

func TestCheck(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(ok))
	defer healthy.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "informers not synced", http.StatusInternalServerError)
	}))
	defer broken.Close()
	stuck := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer stuck.Close()
	moved := httptest.NewServer(http.RedirectHandler("/login", http.StatusFound))
	defer moved.Close()
	refused := refusedURL(t)

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // lines (or parts of them) the output must hold
	}{
		{name: "200 passes", args: []string{"--url", healthy.URL + "/healthz"}, code: 0,
			want: []string{"ok   " + healthy.URL + "/healthz: 200 OK in "}},
		{name: "500 fails with the answer", args: []string{"--url", healthy.URL, "--url", broken.URL + "/readyz"}, code: 1,
			want: []string{"ok   " + healthy.URL + ": 200 OK", `FAIL ` + broken.URL + `/readyz: 500 Internal Server Error: "informers not synced"`, "check: 1 of 2 URLs failed"}},
		{name: "no answer in time fails", args: []string{"--timeout", "200ms", "--url", stuck.URL}, code: 1,
			want: []string{"FAIL " + stuck.URL + ": no answer within 200ms"}},
		{name: "refused fails", args: []string{"--url", refused}, code: 1,
			want: []string{"FAIL " + refused + ": ", "connection refused"}},
		{name: "a redirect is not followed", args: []string{"--url", moved.URL}, code: 1,
			want: []string{"FAIL " + moved.URL + ": 302 Found"}},
		{name: "no URL", args: nil, code: 1, want: []string{"check: no URL to check"}},
		{name: "a bare argument", args: []string{healthy.URL}, code: 2, want: []string{"URLs go in --url"}},
		{name: "an unknown flag", args: []string{"--urls", healthy.URL}, code: 2, want: []string{"flag provided but not defined: -urls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, out := check(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

// TestCheckTLS: --url verifies the server against --ca-file; --insecure-url takes a certificate
// nothing vouches for; the bearer token goes to HTTPS URLs and never over plain HTTP.
func TestCheckTLS(t *testing.T) {
	var gotToken, gotPlainToken string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotToken = r.Header.Get("Authorization")
		ok(w, r)
	}))
	defer srv.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPlainToken = r.Header.Get("Authorization")
		ok(w, r)
	}))
	defer plain.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("sa-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}

	if code, out := check(t, "--url", srv.URL+"/readyz"); code != 1 || !strings.Contains(out, "certificate signed by unknown authority") {
		t.Errorf("unverifiable certificate: exit %d\n%s", code, out)
	}
	if code, out := check(t, "--ca-file", ca, "--bearer-token-file", token, "--url", srv.URL+"/readyz", "--url", plain.URL); code != 0 {
		t.Errorf("with the CA: exit %d\n%s", code, out)
	}
	if gotToken != "Bearer sa-token" || gotPlainToken != "" {
		t.Errorf("Authorization over HTTPS %q, over HTTP %q; want the token over HTTPS only", gotToken, gotPlainToken)
	}
	if code, out := check(t, "--insecure-url", srv.URL+"/metrics"); code != 0 {
		t.Errorf("--insecure-url: exit %d\n%s", code, out)
	}
	if code, out := check(t, "--ca-file", notPEM, "--url", srv.URL); code != 1 || !strings.Contains(out, "no PEM certificate") {
		t.Errorf("a CA file without a certificate: exit %d\n%s", code, out)
	}
	if code, out := check(t, "--bearer-token-file", filepath.Join(dir, "missing"), "--url", srv.URL); code != 1 || !strings.Contains(out, "--bearer-token-file") {
		t.Errorf("a missing token file: exit %d\n%s", code, out)
	}
}
