// Package endpoints serves a binary's own HTTP endpoints, the operator's and the activator's:
// /metrics on a registry of its own, the kubelet's probes (/healthz, /readyz), opt-in pprof,
// and any TLS handler given (the operator's conversion webhook).
package endpoints

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"
)

// NewRegistry is a binary's own metrics registry (no global one), holding the Go runtime's and
// the process's collectors to start with.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Probes is the mux of /healthz (healthz's verdict; nil: always healthy) and /readyz (ready
// while ready returns nil, its error the body otherwise), plus Go's profiles when withPprof.
func Probes(healthz func(*http.Request) error, ready func() error, withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if healthz != nil {
			if err := healthz(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if withPprof {
		runtime.MemProfileRate = 4096 // heap profiles fine enough to see the caches' objects
		// Off by default: profiles expose internals and cost CPU while taken.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	return mux
}

// ErrNotSynced is /readyz's answer while the caches have not synced.
var ErrNotSynced = errors.New("caches not synced")

// Synced is a readiness of Probes: ready once synced says so.
func Synced(synced func() bool) func() error {
	return func() error {
		if !synced() {
			return ErrNotSynced
		}
		return nil
	}
}

// Metrics is the mux serving h on /metrics.
func Metrics(h http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	return mux
}

// ServerTLS loads tls.crt and tls.key from dir, or makes a self-signed certificate with
// selfSigned.
func ServerTLS(dir string, selfSigned func(hosts ...string) (*tls.Config, error)) (*tls.Config, error) {
	if dir == "" {
		host, _ := os.Hostname()
		return selfSigned("localhost", "127.0.0.1", host)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// Listen serves h on addr, over TLS when tlsCfg is set. A port it cannot bind ends the
// process: the kubelet restarts it, and a replica without its probes would be killed anyway.
func Listen(addr string, h http.Handler, what string, tlsCfg *tls.Config) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		klog.ErrorS(err, "Cannot listen", "endpoint", what, "address", addr)
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	// Tests bind to port 0 and read the chosen address from this line.
	klog.InfoS("Serving", "endpoint", what, "address", ln.Addr().String(), "tls", tlsCfg != nil)
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Server failed", "endpoint", what)
		}
	}()
	return srv
}

// Shutdown stops the servers, giving in-flight requests 5 s.
func Shutdown(servers ...*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
}
