// Command inferenceservice-activator holds requests for models scaled to zero (issue 35): a
// model's HTTPRoute sends its requests here while it is at zero, the activator holds them,
// records the demand on the model's Service (which wakes it) and proxies them to the first ready
// pod. It ships in the operator's image as a third binary and runs as its own Deployment. This
// file only wires: flags, clients, the informers (pods, Services, InferenceServices), the
// proxy and the shutdown; /metrics and the probes are the endpoints every binary of the
// operator serves (controller/process/endpoints).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller/activator"
	"github.com/example/inferenceservice-operator/controller/process/endpoints"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

type options struct {
	kubeconfig, namespaces             string
	bindAddr, metricsAddr, probeAddr   string
	headerSources, pathSources         string
	maxHeld, maxHeldTotal, maxHeldNS   int
	maxBuffered, maxBufferedNS         int64
	maxWait, retryAfter, refresh       time.Duration
	responseHeaderTimeout, idleTimeout time.Duration
	shutdownDelay, shutdownGrace       time.Duration
	qps, wakeQPS                       float64
	burst                              int
}

func main() {
	var o options
	defineFlags(&o)
	klog.InitFlags(nil)
	flag.Parse()

	if err := run(o); err != nil {
		klog.ErrorS(err, "Activator stopped")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// defineFlags registers the activator's own flags (klog's come after) on the command line's
// FlagSet, apart from parsing, so a test can read back the set docs/operations.md documents.
func defineFlags(o *options) {
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG, else the in-cluster ServiceAccount.")
	flag.StringVar(&o.namespaces, "namespaces", "", "Comma-separated namespaces whose model pods are watched; empty watches the whole cluster.")
	flag.StringVar(&o.bindAddr, "bind-address", ":8080", "Address of the proxy the models' HTTPRoutes send requests to.")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":9090", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz (ready once the pod informer synced).")
	flag.StringVar(&o.headerSources, "model-header-sources", "", "Comma-separated CIDRs of the callers whose "+kinds.ActivatorModelHeader+" header is believed: the gateway's pod (or node) addresses. Others naming a model by the header are answered 403. Empty: nobody.")
	flag.StringVar(&o.pathSources, "path-sources", "", "Comma-separated CIDRs of the callers who may name a model by the path form /namespace/name/... (the in-cluster URL in an InferenceService's status). Others are answered 403. Empty: the path form is off.")
	flag.IntVar(&o.maxHeld, "max-held", activator.DefaultMaxHeld, "Requests held at once per model; more are answered 503 with Retry-After.")
	flag.IntVar(&o.maxHeldTotal, "max-held-total", activator.DefaultMaxHeldTotal, "Requests held at once in all, of every model; more are answered 503 with Retry-After. Sized with --max-buffered-bytes against the memory limit (controller/activator/budget.go).")
	flag.IntVar(&o.maxHeldNS, "max-held-per-namespace", activator.DefaultMaxHeldPerNamespace, "Requests held at once for the models of one namespace; more are answered 503 with Retry-After.")
	flag.Int64Var(&o.maxBuffered, "max-buffered-bytes", activator.DefaultMaxBufferedBytes, "Bytes of request bodies read ahead and kept at once, in all; a request past it is answered 503 with Retry-After.")
	flag.Int64Var(&o.maxBufferedNS, "max-buffered-bytes-per-namespace", activator.DefaultMaxBufferedPerNamespace, "Bytes of request bodies read ahead and kept at once for one namespace's models.")
	flag.DurationVar(&o.responseHeaderTimeout, "response-header-timeout", activator.DefaultResponseHeaderTimeout, "How long a ready pod may take to send its response headers (a non-streamed completion sends them after its last token).")
	flag.DurationVar(&o.idleTimeout, "idle-timeout", 2*time.Minute, "How long a client's kept-alive connection may sit idle between requests.")
	flag.DurationVar(&o.maxWait, "max-wait", activator.DefaultMaxWait, "How long one request is held for a ready pod before 503 with Retry-After; the gateway's request timeout must exceed it.")
	flag.DurationVar(&o.retryAfter, "retry-after", activator.DefaultRetryAfter, "Retry-After told to refused clients.")
	flag.DurationVar(&o.refresh, "refresh-period", activator.DefaultRefreshPeriod, "The most often a model's last-request annotation is rewritten while its requests arrive or are in flight (a wake is written at once).")
	flag.DurationVar(&o.shutdownDelay, "shutdown-delay", 5*time.Second, "On SIGTERM, how long /readyz fails while requests are still accepted, so endpoints drop this pod first.")
	flag.DurationVar(&o.shutdownGrace, "shutdown-grace", 20*time.Second, "On SIGTERM, after the delay, how long requests in flight and held may finish before they are cut; the pod's terminationGracePeriodSeconds must exceed delay and grace.")
	flag.Float64Var(&o.qps, "kube-api-qps", 20, "Client-side QPS limit toward the API server.")
	flag.IntVar(&o.burst, "kube-api-burst", 40, "Client-side burst toward the API server.")
	flag.Float64Var(&o.wakeQPS, "wake-qps", 10, "Client-side QPS limit of the wakes' own client, apart from --kube-api-qps: no number of refreshes spends it.")
}

func run(o options) error {
	if o.kubeconfig == "" {
		// $KUBECONFIG before the in-cluster ServiceAccount, as kubectl and controller-runtime read it.
		o.kubeconfig = os.Getenv("KUBECONFIG")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = rest.DefaultKubernetesUserAgent() + " " + activator.FieldManager
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	wakeCfg := rest.CopyConfig(cfg)
	wakeCfg.QPS, wakeCfg.Burst = float32(o.wakeQPS), max(1, int(o.wakeQPS))
	wakeClient, err := kubernetes.NewForConfig(wakeCfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	headerFrom, err := activator.ParseSources(o.headerSources)
	if err != nil {
		return fmt.Errorf("--model-header-sources: %w", err)
	}
	pathFrom, err := activator.ParseSources(o.pathSources)
	if err != nil {
		return fmt.Errorf("--path-sources: %w", err)
	}
	klog.InfoS("Callers allowed to name a model", "header", headerFrom.String(), "path", pathFrom.String())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	reg := endpoints.NewRegistry()
	metrics := activator.NewMetrics(reg)

	models := activator.NewModels()
	activity := activator.NewActivity(client.CoreV1(), activator.ActivityOptions{
		RefreshPeriod: o.refresh, Metrics: metrics, WakeServices: wakeClient.CoreV1(), Owned: models.Owned,
	})
	holder := activator.NewHolder(activator.Options{
		MaxHeld: o.maxHeld, MaxHeldTotal: o.maxHeldTotal, MaxHeldPerNamespace: o.maxHeldNS,
		MaxWait: o.maxWait, RetryAfter: o.retryAfter, Wake: activity.Wake, Metrics: metrics,
	})
	handler := activator.NewHandler(holder, activator.HandlerOptions{
		Header: kinds.ActivatorModelHeader, Catalog: models, HeaderSources: headerFrom, PathSources: pathFrom,
		Transport: activator.NewTransport(o.responseHeaderTimeout), Budget: activator.NewBudget(o.maxBuffered, o.maxBufferedNS),
		Recorder: activity,
	})

	// One factory per watched namespace (or one for all), each listing only the operator's pods
	// and Services, and the InferenceServices (which say which models scale to zero).
	feed := activator.NewFeed(holder, activator.ModelPort)
	var factories []informers.SharedInformerFactory
	var isvcInformers []cache.SharedIndexInformer
	var synced []cache.InformerSynced
	for _, ns := range namespaceList(o.namespaces) {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = activator.PodSelector }),
			informers.WithTransform(activator.Strip))
		s, err := feed.Watch(f.Core().V1().Pods().Informer())
		if err != nil {
			return err
		}
		svcs := f.Core().V1().Services().Informer()
		isvcs := dynamicinformer.NewFilteredDynamicInformer(dyn, crd.Resource, ns, 0, cache.Indexers{}, nil).Informer()
		if err := isvcs.SetTransform(activator.StripModel); err != nil {
			return err
		}
		models.Add(isvcs.GetStore(), svcs.GetStore())
		factories, isvcInformers = append(factories, f), append(isvcInformers, isvcs)
		synced = append(synced, s, svcs.HasSynced, isvcs.HasSynced)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	informerStop := make(chan struct{})
	for _, f := range factories {
		f.Start(informerStop)
	}
	for _, inf := range isvcInformers {
		wg.Go(func() { inf.Run(informerStop) })
	}
	defer func() {
		close(informerStop)
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	activityCtx, stopActivity := context.WithCancel(context.Background())
	defer stopActivity()
	wg.Go(func() { activity.Run(activityCtx) })

	// Ready once every informer synced (a request held before would miss a ready pod), and not
	// ready again from SIGTERM on.
	var ready, terminating atomic.Bool
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			ready.Store(true)
			klog.InfoS("Pod informers synced; ready")
		}
	}()
	probes := endpoints.Probes(nil, readiness(&ready, &terminating), false)
	side := []*http.Server{endpoints.Listen(listenAddr(o.probeAddr), probes, "probes", nil)}
	if o.metricsAddr != "0" {
		h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
		side = append(side, endpoints.Listen(listenAddr(o.metricsAddr), endpoints.Metrics(h), "metrics", nil))
	}
	// No write timeout: a held request waits up to --max-wait, and a completion streams for
	// minutes. An idle kept-alive connection is closed: a stranger's thousand idle connections
	// cost their buffers only that long.
	proxy := &http.Server{Addr: listenAddr(o.bindAddr), Handler: metrics.Instrument(handler), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: o.idleTimeout}

	errs := make(chan error, 1)
	go func() {
		klog.InfoS("Serving", "endpoint", "proxy", "address", proxy.Addr)
		if err := proxy.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("serve %s: %w", proxy.Addr, err)
		}
	}()

	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	klog.InfoS("Shutting down", "delay", o.shutdownDelay, "grace", o.shutdownGrace)
	terminating.Store(true)
	time.Sleep(o.shutdownDelay)
	graceCtx, cancel := context.WithTimeout(context.Background(), o.shutdownGrace)
	defer cancel()
	// Stops accepting, then waits for the requests held and in flight within the grace.
	err = proxy.Shutdown(graceCtx)
	if err != nil {
		klog.ErrorS(err, "Requests cut at the end of the shutdown grace")
		_ = proxy.Close()
	}
	endpoints.Shutdown(side...)
	stopActivity()
	return nil
}

// errShuttingDown is /readyz's answer from SIGTERM on.
var errShuttingDown = errors.New("shutting down")

// readiness is /readyz's verdict: ready once every informer synced, and not from SIGTERM on,
// so endpoints drop this pod while it still accepts requests.
func readiness(synced, terminating *atomic.Bool) func() error {
	return func() error {
		switch {
		case terminating.Load():
			return errShuttingDown
		case !synced.Load():
			return endpoints.ErrNotSynced
		}
		return nil
	}
}

// listenAddr brackets an IPv6 host given bare, as $(POD_IP):8080 gives it on an IPv6 cluster
// ("fd00::1:8080"), which net.Listen refuses.
func listenAddr(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return addr
	}
	if ip := net.ParseIP(addr[:i]); ip != nil && ip.To4() == nil {
		return net.JoinHostPort(addr[:i], addr[i+1:])
	}
	return addr
}

// namespaceList splits --namespaces; empty is the whole cluster.
func namespaceList(s string) []string {
	var out []string
	for _, ns := range strings.Split(s, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	if len(out) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return out
}
