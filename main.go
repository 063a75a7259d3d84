// Command inferenceservice-operator runs the InferenceService controller: it only wires flags,
// clients, caches, metrics, probes and leader election together and starts the controller.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/crd/storage"
	"github.com/example/inferenceservice-operator/crd/webhook"
	"github.com/example/inferenceservice-operator/informers"
	"github.com/example/inferenceservice-operator/metrics"
	"github.com/example/inferenceservice-operator/queue"
	"github.com/example/inferenceservice-operator/queue/ratelimit"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

type options struct {
	kubeconfig, namespaces, gatewayURL        string
	metricsAddr, probeAddr                    string
	metricsSecure, pprof                      bool
	metricsCertDir                            string
	workers, burst                            int
	qps                                       float64
	resync, backoffBase, backoffMax           time.Duration
	progressHold, deregisterTimeout           time.Duration
	leaderElect                               bool
	leaseNamespace, leaseName                 string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	webhookAddr, webhookCertDir               string
	webhookCASync                             time.Duration
	apiVersion, gatewayParent                 string
	serviceMonitors                           bool
	migrationPeriod                           time.Duration
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses the in-cluster ServiceAccount.")
	flag.StringVar(&o.namespaces, "namespaces", "", "Comma-separated namespaces to watch; empty watches the whole cluster.")
	flag.StringVar(&o.gatewayURL, "gateway-url", "", "Gateway admin API for route registration (PUT/DELETE {url}/routes/{ns}/{name}); empty disables registration and the finalizer.")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve /metrics over HTTPS to bearer tokens the API server authenticates (TokenReview) and authorizes for GET on /metrics (SubjectAccessReview).")
	flag.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with tls.crt and tls.key for --metrics-secure; empty uses a self-signed certificate.")
	flag.BoolVar(&o.pprof, "pprof", false, "Serve Go's /debug/pprof/ profiles on the health probe address (loopback use only: no authentication).")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	flag.IntVar(&o.workers, "workers", 8, "Concurrent reconciles.")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "Client-side QPS limit toward the API server.")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "Client-side burst toward the API server.")
	flag.DurationVar(&o.resync, "resync", 10*time.Minute, "How often every cached object is re-delivered; converged objects cause no writes.")
	flag.DurationVar(&o.deregisterTimeout, "gateway-deregister-timeout", 0, "How long a deleted InferenceService waits for its gateway route to be deregistered before its finalizer is released anyway (a Warning Event and inferenceservice_operator_gateway_routes_abandoned_total count it); 0 waits for the gateway. In a namespace being deleted the finalizer is released at the first failure, whatever this is.")
	flag.DurationVar(&o.progressHold, "progress-hold", controller.DefaultProgressHold, "How long a serving model's rollout may keep its last Ready status (for the previous observedGeneration) before Progressing is written; the default is the Deployment's default progressDeadlineSeconds. A new isvc's first status waits at most 1m (or this, if shorter) while child writes are contended. 0 writes every transition.")
	flag.DurationVar(&o.backoffBase, "backoff-base", 5*time.Millisecond, "First retry delay of a failing InferenceService; doubles per failure.")
	flag.DurationVar(&o.backoffMax, "backoff-max", 5*time.Minute, "Largest retry delay of a failing InferenceService.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader on a Lease so only one replica reconciles.")
	flag.StringVar(&o.leaseNamespace, "leader-election-namespace", "", "Namespace of the Lease; empty uses the pod's namespace.")
	flag.StringVar(&o.leaseName, "leader-election-id", "inferenceservice-operator", "Name of the Lease.")
	flag.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a lease is valid without renewal.")
	flag.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader retries renewing before giving up.")
	flag.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "How often candidates retry.")
	klog.InitFlags(nil)
	flag.StringVar(&o.webhookAddr, "webhook-bind-address", "", "Address of the TLS conversion webhook (POST "+crd.WebhookPath+"); empty disables it. Needed only with manifests/overlays/v1beta1.")
	flag.StringVar(&o.webhookCertDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "inferenceservice-operator-webhook"), "Directory for the webhook's self-managed CA and serving certificate ("+webhook.CAFile+", "+webhook.CertFile+", "+webhook.KeyFile+"); reused while valid.")
	flag.DurationVar(&o.webhookCASync, "webhook-ca-sync-period", time.Minute, "How often the webhook's CA is checked in the CRD's caBundle (and added when missing).")
	flag.StringVar(&o.apiVersion, "api-version", "auto", "InferenceService version to watch and write status in: v1alpha1, v1beta1, or auto (v1beta1 when the API server serves it).")
	flag.DurationVar(&o.migrationPeriod, "storage-migration-period", time.Minute, "How often the leader checks the CRD's storedVersions and, after a storage version change, rewrites every InferenceService into the storage version; 0 disables it.")
	flag.StringVar(&o.gatewayParent, "gateway-parent", "", "namespace/name of the Gateway API Gateway that HTTPRoutes of models with spec.gateway attach to; empty creates no HTTPRoutes.")
	flag.BoolVar(&o.serviceMonitors, "service-monitors", true, "Create a ServiceMonitor per model when the Prometheus Operator's CRD (monitoring.coreos.com/v1) is served.")
	flag.Parse()
	return o
}

func main() {
	o := parseFlags()
	if soft := softMemoryLimit(os.Getenv); soft > 0 {
		klog.InfoS("Go heap soft limit set from the container's memory limit", "bytes", soft)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "Operator failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func restConfig(o options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "inferenceservice-operator/" + version
	return cfg, nil
}

func run(ctx context.Context, o options) error {
	cfg, err := restConfig(o)
	if err != nil {
		return fmt.Errorf("kubernetes client config: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg, version)
	clientmetrics.Register(m.ClientGoOpts())

	// One --kube-api-qps budget for the typed clients, children's writes first: Events only
	// report, and must not delay the creates that make a model run. The dynamic client (isvc
	// status and finalizers) keeps its own budget, as client-go gives each client one.
	budget := ratelimit.New(float32(o.qps), o.burst)
	defer budget.Stop()
	kcfg := rest.CopyConfig(cfg)
	kcfg.RateLimiter = budget.Class(ratelimit.High)
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return err
	}
	ecfg := rest.CopyConfig(kcfg)
	ecfg.RateLimiter = budget.Class(ratelimit.Low)
	eventsClient, err := kubernetes.NewForConfig(ecfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The controller's clients (caches, reconciles, Events) go through the write fence with
	// leader election; the Lease, the webhook's CA and metrics auth stay unfenced, for standbys.
	var fence *writeFence
	ctrlKube, ctrlEvents, ctrlDyn := kube, eventsClient, dyn
	if o.leaderElect {
		fence = newWriteFence(o.renewDeadline, reg)
		fenced := func(c *rest.Config) *rest.Config {
			f := rest.CopyConfig(c) // the same rate limiter: one budget, fenced or not
			f.Wrap(fence.Wrap)
			return f
		}
		if ctrlKube, err = kubernetes.NewForConfig(fenced(kcfg)); err != nil {
			return err
		}
		if ctrlEvents, err = kubernetes.NewForConfig(fenced(ecfg)); err != nil {
			return err
		}
		if ctrlDyn, err = dynamic.NewForConfig(fenced(cfg)); err != nil {
			return err
		}
	}
	if o.webhookAddr != "" {
		// Every replica serves conversions, leader or not: the API server calls whichever the
		// Service picks, and cannot read any version but storage's while none answers.
		srv, err := serveWebhook(ctx, o, dyn)
		if err != nil {
			return fmt.Errorf("conversion webhook: %w", err)
		}
		defer shutdown([]*http.Server{srv})
	}

	var gw controller.Registrar
	if o.gatewayURL != "" {
		if gw, err = controller.NewHTTPRegistrar(o.gatewayURL); err != nil {
			return err
		}
	}

	apiVersion, err := watchedVersion(o.apiVersion, kube.Discovery())
	if err != nil {
		return err
	}
	features, optional, err := discoverFeatures(o, kube.Discovery())
	if err != nil {
		return err
	}
	caches := informers.New(ctrlKube, ctrlDyn, informers.Options{Namespaces: splitList(o.namespaces), Resync: o.resync,
		Resource: schema.GroupVersionResource{Group: crd.Group, Version: apiVersion, Resource: crd.Plural}, Optional: optional})
	reg.MustRegister(metrics.NewQuotaCollector(caches))
	m.SetMaxConcurrentReconciles(o.workers)
	qcfg := queue.DefaultConfig("inferenceservice")
	qcfg.BaseDelay, qcfg.MaxDelay, qcfg.MetricsProvider = o.backoffBase, o.backoffMax, m.Workqueue
	q := queue.New(qcfg, m)

	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: ctrlEvents.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, controller.FieldManager)

	ctrl := controller.New(controller.Config{
		Kube: ctrlKube, Dynamic: ctrlDyn, Caches: caches, Queue: q, Recorder: recorder, Gateway: gw, Metrics: m,
		Version: apiVersion, Features: features, Busy: budget.Contended, ProgressHold: o.progressHold,
		DeregisterTimeout: o.deregisterTimeout,
	})
	if err := caches.AddEventHandlers(ctrl.Handlers()); err != nil {
		return err
	}

	var leading atomic.Bool
	// With leader election, /healthz fails when this replica leads but has not renewed the lease
	// for longer than the lease plus 20s, so the kubelet restarts a wedged leader.
	var watchdog *leaderelection.HealthzAdaptor
	healthz := func(*http.Request) error { return nil }
	if o.leaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		healthz = watchdog.Check
	}
	metricsHandler := http.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	var metricsTLS *tls.Config
	if o.metricsSecure {
		if metricsTLS, err = serverTLS(o.metricsCertDir); err != nil {
			return fmt.Errorf("metrics TLS: %w", err)
		}
		metricsHandler = metrics.NewAuthorizer(kube, time.Minute, 10*time.Second).Wrap(metricsHandler)
	}
	servers := serve(o, metricsHandler, metricsTLS, caches.HasSynced, healthz)
	defer shutdown(servers)

	// Caches start before leadership so a new leader starts warm.
	caches.Start(ctx)
	if !caches.WaitForCacheSync(ctx) {
		return errors.New("caches did not sync before shutdown")
	}
	klog.InfoS("Caches synced", "version", version, "apiVersion", apiVersion, "serviceMonitors", features.ServiceMonitors, "httpRoutes", features.HTTPRoutes, "namespaces", o.namespaces, "workers", o.workers)

	work := func(ctx context.Context) {
		if o.migrationPeriod > 0 {
			// One writer rewrites stored objects: the leader, next to the workers.
			go storage.Run(ctx, ctrlDyn, o.migrationPeriod)
		}
		if o.webhookAddr != "" {
			go probeConversion(ctx, o, dyn, apiVersion, m, recorder)
		}
		ctrl.Run(ctx, o.workers)
	}
	if !o.leaderElect {
		work(ctx)
		return nil
	}
	return runLeader(ctx, o, kube, fence, m, &leading, watchdog, work)
}

// probeConversion has the leader read InferenceServices in the version it does not watch, as
// users' reads in that version do, and report a failing webhook as a gauge and, on each
// change, an Event on the CRD (kubectl describe crd inferenceservices.ai.example.com).
func probeConversion(ctx context.Context, o options, dyn dynamic.Interface, watched string, m *metrics.Metrics, rec events.EventRecorder) {
	other := crd.VersionV1beta1
	if watched == crd.VersionV1beta1 {
		other = crd.Version
	}
	ns := ""
	if list := splitList(o.namespaces); len(list) > 0 {
		ns = list[0]
	}
	r := &webhook.TransitionReporter{
		Gauge: m.SetConversionUp,
		Event: func(warning bool, reason, msg string) {
			obj, err := webhook.CRDObject(ctx, dyn)
			if err != nil {
				klog.ErrorS(err, "Cannot record the conversion probe's event", "reason", reason)
				return
			}
			typ := corev1.EventTypeNormal
			if warning {
				typ = corev1.EventTypeWarning
			}
			rec.Eventf(obj, nil, typ, reason, "Convert", "%s", msg)
		},
	}
	webhook.RunProbe(ctx, dyn, ns, other, o.webhookCASync, r)
}

// watchedVersion resolves --api-version: auto picks v1beta1 when the API server serves it
// (the v1beta1 install, where it is the storage version and status has its additions).
func watchedVersion(flagValue string, disco discovery.DiscoveryInterface) (string, error) {
	switch flagValue {
	case crd.Version, crd.VersionV1beta1:
		return flagValue, nil
	case "auto":
	default:
		return "", fmt.Errorf("--api-version=%q: want %s, %s or auto", flagValue, crd.Version, crd.VersionV1beta1)
	}
	ok, err := served(disco, crd.ResourceV1beta1)
	if err != nil || !ok {
		return crd.Version, err
	}
	return crd.VersionV1beta1, nil
}

// served reports whether the API server serves gvr.
func served(disco discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := disco.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gvr.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// discoverFeatures turns on the optional children whose CRDs are served; a CRD installed
// later needs a restart (the Deployment's rollout), as with other operators.
func discoverFeatures(o options, disco discovery.DiscoveryInterface) (controller.Features, []schema.GroupVersionResource, error) {
	var f controller.Features
	var watch []schema.GroupVersionResource
	if o.serviceMonitors {
		ok, err := served(disco, controller.ServiceMonitorGVR)
		if err != nil {
			return f, nil, err
		}
		if f.ServiceMonitors = ok; ok {
			watch = append(watch, controller.ServiceMonitorGVR)
		}
	}
	if o.gatewayParent != "" {
		ns, name, found := strings.Cut(o.gatewayParent, "/")
		if !found || ns == "" || name == "" {
			return f, nil, fmt.Errorf("--gateway-parent=%q: want namespace/name", o.gatewayParent)
		}
		ok, err := served(disco, controller.HTTPRouteGVR)
		if err != nil {
			return f, nil, err
		}
		if !ok {
			klog.InfoS("Gateway API HTTPRoutes are not served; --gateway-parent has no effect", "parent", o.gatewayParent)
		}
		if f.HTTPRoutes = ok; ok {
			f.GatewayParent = types.NamespacedName{Namespace: ns, Name: name}
			watch = append(watch, controller.HTTPRouteGVR)
		}
	}
	return f, watch, nil
}

// runLeader runs work only while this replica holds the Lease. On SIGTERM (ctx done) the
// workers finish first and then the Lease is released, so a rollout hands over at once without
// two writers; when the Lease is lost instead, the process exits non-zero immediately.
func runLeader(ctx context.Context, o options, kube kubernetes.Interface, fence *writeFence, m *metrics.Metrics, leading *atomic.Bool, watchdog *leaderelection.HealthzAdaptor, work func(context.Context)) error {
	ns := o.leaseNamespace
	if ns == "" {
		b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return fmt.Errorf("--leader-election-namespace is required outside a cluster: %w", err)
		}
		ns = strings.TrimSpace(string(b))
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	id = id + "_" + fmt.Sprint(os.Getpid())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, o.leaseName, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	lock = fencedLock{Interface: lock, f: fence}
	// The elector's context outlives ctx until the workers have stopped: ReleaseOnCancel must
	// only release a Lease whose guarded work is done, or two replicas could write at once.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	workDone := make(chan struct{})
	var started atomic.Bool
	go func() {
		<-ctx.Done()
		if started.Load() {
			<-workDone
		}
		stopElecting()
	}()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod,
		ReleaseOnCancel: true, Name: o.leaseName, WatchDog: watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				started.Store(true)
				defer close(workDone)
				if ctx.Err() != nil {
					return // acquired as SIGTERM arrived: release without working
				}
				klog.InfoS("Became leader", "identity", id, "lease", ns+"/"+o.leaseName)
				leading.Store(true)
				m.SetLeader(o.leaseName, true)
				wctx, cancel := context.WithCancel(lctx)
				defer context.AfterFunc(ctx, cancel)()
				work(wctx)
			},
			OnStoppedLeading: func() {
				leading.Store(false)
				m.SetLeader(o.leaseName, false)
				if ctx.Err() == nil {
					// Lost, not released: in-flight reconciles must not write another byte, so
					// exit now rather than drain them; the Deployment restarts the container.
					klog.ErrorS(nil, "Lost the leader lease; exiting", "identity", id)
					klog.FlushAndExit(klog.ExitFlushTimeout, 1)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(electCtx)
	return nil
}

// serverTLS loads tls.crt and tls.key from dir, or makes a self-signed certificate.
func serverTLS(dir string) (*tls.Config, error) {
	if dir == "" {
		host, _ := os.Hostname()
		return metrics.SelfSignedTLS("localhost", "127.0.0.1", host)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

func serve(o options, metricsHandler http.Handler, metricsTLS *tls.Config, synced func() bool, healthz func(*http.Request) error) []*http.Server {
	var servers []*http.Server
	if o.metricsAddr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", metricsHandler)
		servers = append(servers, listen(o.metricsAddr, mux, "metrics", metricsTLS))
	}
	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := healthz(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if o.pprof {
		runtime.MemProfileRate = 4096 // heap profiles fine enough to see the caches' objects
		// Off by default: profiles expose internals and cost CPU while taken.
		probes.HandleFunc("/debug/pprof/", pprof.Index)
		probes.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	return append(servers, listen(o.probeAddr, probes, "probes", nil))
}

// serveWebhook makes or reuses the webhook's certificates, keeps their CA in the CRD's
// caBundle and serves ConversionReviews.
func serveWebhook(ctx context.Context, o options, dyn dynamic.Interface) (*http.Server, error) {
	svc := crd.WebhookServiceName + "." + crd.WebhookServiceNamespace + ".svc"
	certs, err := webhook.EnsureCerts(o.webhookCertDir, []string{"127.0.0.1", svc, svc + ".cluster.local"}, time.Now())
	if err != nil {
		return nil, err
	}
	go webhook.SyncCABundle(ctx, dyn, certs.CAPEM, o.webhookCASync)
	mux := http.NewServeMux()
	mux.Handle(crd.WebhookPath, webhook.ConvertHandler())
	return listen(o.webhookAddr, mux, "webhook", certs.TLSConfig()), nil
}

// listen serves h on addr, over TLS when tlsCfg is set.
func listen(addr string, h http.Handler, what string, tlsCfg *tls.Config) *http.Server {
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

func shutdown(servers []*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
