// Package urlcheck is the operator binary's check mode (`inferenceservice-operator check`), what
// the chart's `helm test` Pod runs: the image has no shell and no curl, so its own binary GETs
// each URL once and passes only when every one answers 2xx, one line per URL.
package urlcheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Target is one URL to check.
type Target struct {
	URL string
	// Insecure skips certificate verification, for a server whose self-signed certificate no CA
	// vouches for (the operator's --metrics-secure without --metrics-cert-dir).
	Insecure bool
}

// Options apply to every target.
type Options struct {
	CAFile    string        // PEM CAs verifying HTTPS targets; empty: the system's
	TokenFile string        // a bearer token sent to HTTPS targets only; empty: none
	Timeout   time.Duration // per URL, connection to the end of the answer's headers
}

// DefaultTimeout is a URL's budget: a Service whose pods answer at all answer well within it.
const DefaultTimeout = 10 * time.Second

// Run checks every target in order, writes one line each to w, and returns an error naming
// how many failed.
func Run(ctx context.Context, w io.Writer, targets []Target, o Options) error {
	if len(targets) == 0 {
		return errors.New("no URL to check")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	var roots *x509.CertPool
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca-file %s: no PEM certificate in it", o.CAFile)
		}
	}
	var token string
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return fmt.Errorf("--bearer-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	failed := 0
	for _, t := range targets {
		start := time.Now()
		status, err := get(ctx, t, roots, token, o.Timeout)
		if err != nil {
			failed++
			fmt.Fprintf(w, "FAIL %s: %v\n", t.URL, err)
			continue
		}
		fmt.Fprintf(w, "ok   %s: %s in %s\n", t.URL, status, time.Since(start).Round(time.Millisecond))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d URLs failed", failed, len(targets))
	}
	return nil
}

// get GETs one target; a non-2xx answer is an error carrying the start of its body.
func get(ctx context.Context, t Target, roots *x509.CertPool, token string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return "", err
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return "", fmt.Errorf("scheme %q: want http or https", req.URL.Scheme)
	}
	// The token goes only where TLS hides it; plain HTTP endpoints need none.
	if token != "" && req.URL.Scheme == "https" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{
		Transport: &http.Transport{
			// In-cluster names never go through a proxy; InsecureSkipVerify only for Target.Insecure.
			Proxy:           nil,
			TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, InsecureSkipVerify: t.Insecure},
		},
		// A redirect is not the endpoint answering: report it, do not follow it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("no answer within %s", timeout)
		}
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return "", fmt.Errorf("%s: %q", resp.Status, strings.TrimSpace(string(body)))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.Status, nil
}

// urls is a repeatable flag.
type urls []string

func (u *urls) String() string     { return strings.Join(*u, ",") }
func (u *urls) Set(v string) error { *u = append(*u, v); return nil }

// Main is `inferenceservice-operator check [flags]`: it parses args (those after "check"),
// runs the check and returns the process's exit code: 0 when every URL answered 2xx, 1 when
// one did not, 2 for bad flags.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var verified, insecure urls
	var o Options
	fs.Var(&verified, "url", "A URL that must answer GET with 2xx; HTTPS verified against --ca-file (repeatable).")
	fs.Var(&insecure, "insecure-url", "A URL that must answer GET with 2xx, its certificate not verified: for a self-signed serving certificate no CA vouches for (repeatable).")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM file of the CAs that verify --url's HTTPS servers; empty: the system's.")
	fs.StringVar(&o.TokenFile, "bearer-token-file", "", "File of a bearer token sent to HTTPS URLs (e.g. the pod's ServiceAccount token), for endpoints that authorize their callers.")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "How long each URL may take to answer.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "check: unexpected arguments %q (URLs go in --url)\n", fs.Args())
		return 2
	}
	var targets []Target
	for _, u := range verified {
		targets = append(targets, Target{URL: u})
	}
	for _, u := range insecure {
		targets = append(targets, Target{URL: u, Insecure: true})
	}
	if err := Run(ctx, stdout, targets, o); err != nil {
		fmt.Fprintln(stderr, "check:", err)
		return 1
	}
	return 0
}
