// Command gateway is a minimal Gateway API data plane for the local cluster, the part of a
// gateway the inference extension's integration tests get from Envoy: it serves the
// HTTPRoutes attached to one Gateway (PathPrefix matches, URLRewrite ReplacePrefixMatch),
// forwards to Service backends (their ready EndpointSlice endpoints, round-robin) and to
// InferencePool backends by asking the pool's endpoint picker over ext_proc which pod serves
// each request, and writes the routes' and pools' status.parents entries for its Gateway.
// Every response it forwards carries x-gateway-destination-endpoint: the pod that served.
// See test/epp/README.md.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// PoolGroup is the InferencePool's API group (v1).
const PoolGroup = "inference.networking.k8s.io"

// ControllerName is the controllerName of the status.parents entries the gateway writes.
const ControllerName = "inferenceservice-operator.example.com/test-gateway"

func main() {
	var (
		listen, metricsListen, gw, kubeconfig string
		insecureSkipVerify                    bool
		routeTimeout, pickTimeout             time.Duration
	)
	flag.StringVar(&listen, "listen", "127.0.0.1:8080", "HTTP address the gateway serves (a loopback address).")
	flag.StringVar(&metricsListen, "metrics-listen", "", "Address of /metrics (Prometheus); empty: off.")
	flag.StringVar(&gw, "gateway", "", "NAMESPACE/NAME of the Gateway whose HTTPRoutes this serves (required).")
	flag.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig; empty: $KUBECONFIG.")
	flag.BoolVar(&insecureSkipVerify, "epp-insecure-skip-verify", true, "Dial the endpoint picker over TLS without verifying its (self-signed) certificate; false: plaintext.")
	flag.DurationVar(&routeTimeout, "default-route-timeout", DefaultRouteTimeout, "Timeout of a route that sets no timeouts.request, response included (Envoy's route timeout, 15s); 0: none.")
	flag.DurationVar(&pickTimeout, "pick-timeout", 10*time.Second, "Bound on one ext_proc exchange with a picker.")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, listen, metricsListen, gw, kubeconfig, insecureSkipVerify, routeTimeout, pickTimeout); err != nil {
		log.Error("gateway failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, listen, metricsListen, gw, kubeconfig string, insecureSkipVerify bool, routeTimeout, pickTimeout time.Duration) error {
	ns, name, ok := strings.Cut(gw, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--gateway %q: want NAMESPACE/NAME", gw)
	}
	for _, a := range []string{listen, metricsListen} {
		if a == "" {
			continue
		}
		host, _, err := net.SplitHostPort(a)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("listen address %q: want a loopback IP:port", a)
		}
	}
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		return errors.New("--kubeconfig or KUBECONFIG is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	var eppCreds *tls.Config
	if insecureSkipVerify {
		eppCreds = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the picker's certificate is self-signed
	}
	g := newGateway(log, dyn, ns, name, m, eppCreds, routeTimeout, pickTimeout)
	g.istio.on = *istioFlag
	if err := g.start(ctx); err != nil {
		return err
	}

	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	var msrv *http.Server
	if metricsListen != "" {
		mlis, err := net.Listen("tcp", metricsListen)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = msrv.Serve(mlis) }()
		log.Info("metrics listening", "addr", mlis.Addr().String())
	}
	log.Info("gateway listening", "addr", lis.Addr().String(), "gateway", gw)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if msrv != nil {
		_ = msrv.Shutdown(sctx)
	}
	g.close()
	return nil
}

// metrics are the gateway's Prometheus series.
type metrics struct {
	requests      *prometheus.CounterVec   // by backend kind, endpoint, code
	pickerErrors  *prometheus.CounterVec   // by pool, reason
	extProcTime   *prometheus.HistogramVec // by pool
	upstreamError *prometheus.CounterVec   // by backend kind
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "test_gateway_requests_total", Help: "Requests forwarded, by backend kind, endpoint (IP:port) and response code.",
		}, []string{"backend_kind", "endpoint", "code"}),
		pickerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "test_gateway_picker_errors_total", Help: "Failed ext_proc exchanges with an endpoint picker, by InferencePool and failure mode.",
		}, []string{"pool", "failure_mode"}),
		extProcTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "test_gateway_ext_proc_duration_seconds", Help: "Duration of the ext_proc request phase (headers and body to the pick).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"pool"}),
		upstreamError: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "test_gateway_upstream_errors_total", Help: "Forwarded requests that got no response, by backend kind.",
		}, []string{"backend_kind"}),
	}
	reg.MustRegister(m.requests, m.pickerErrors, m.extProcTime, m.upstreamError)
	return m
}
