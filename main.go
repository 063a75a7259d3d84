// Command inferenceservice-operator runs the InferenceService controller: it only wires flags,
// clients, caches, metrics, probes and leader election together and starts the controller.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/controller"
	"github.com/example/inferenceservice-operator/controller/modelserver"
	"github.com/example/inferenceservice-operator/controller/process/clients"
	"github.com/example/inferenceservice-operator/controller/process/endpoints"
	"github.com/example/inferenceservice-operator/controller/process/leader"
	"github.com/example/inferenceservice-operator/controller/process/memlimit"
	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/controller/process/urlcheck"
	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/controller/recorder"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/crd/storage"
	"github.com/example/inferenceservice-operator/crd/webhook"
	"github.com/example/inferenceservice-operator/informers"
	"github.com/example/inferenceservice-operator/metrics"
	"github.com/example/inferenceservice-operator/queue"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

type options struct {
	kubeconfig, namespaces, gatewayURL                 string
	metricsAddr, probeAddr                             string
	metricsSecure, pprof, watchNodes, watchAPIServices bool
	creatingEvidenceAfter                              time.Duration
	metricsCertDir                                     string
	workers, burst                                     int
	qps                                                float64
	resync, backoffBase, backoffMax                    time.Duration
	progressHold, deregisterTimeout                    time.Duration
	leaderElect                                        bool
	leaseNamespace, leaseName                          string
	leaseDuration, renewDeadline, retryPeriod          time.Duration
	webhookAddr, webhookCertDir                        string
	webhookCASync                                      time.Duration
	apiVersion, gatewayParent, activatorService        string
	inferencePool, pickerImage, pickerClusterRole      string
	pickerRefresh                                      time.Duration
	serviceMonitors                                    bool
	networkPolicies                                    bool
	npInstall, npGateway, npPeers                      string
	autoscaler, kedaPrometheus                         string
	rolloutPrometheus                                  string
	migrationPeriod                                    time.Duration
	modelServerTimeout, adapterLoadTimeout             time.Duration
}

func parseFlags() options {
	var o options
	defineFlags(&o)
	klog.InitFlags(nil)
	flag.Parse()
	return o
}

// defineFlags registers the operator's own flags (klog's come after) on the command line's
// FlagSet, apart from parsing, so a test can read back the set docs/operations.md documents.
func defineFlags(o *options) {
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG, else the in-cluster ServiceAccount.")
	flag.StringVar(&o.namespaces, "namespaces", "", "Comma-separated namespaces to watch; empty watches the whole cluster.")
	flag.DurationVar(&o.creatingEvidenceAfter, "creating-evidence-after", reconcile.DefaultCreatingEvidenceAfter, "A model pod whose container is still being created this long after it was scheduled has its Events read (a pull in progress, a volume that will not mount), again each period while it stays; 0 reads none.")
	flag.BoolVar(&o.watchAPIServices, "watch-apiservices", true, "Watch the aggregator's APIServices (list and watch, stripped to their availability) so a model whose HPA cannot read custom metrics because no metrics adapter is registered, or its APIService is down, says AutoscalingActive False from its first status instead of waiting for a ready pod; false waits.")
	flag.BoolVar(&o.watchNodes, "watch-nodes", true, "Watch Nodes (list and watch, stripped to their GPU facts) so a model failing on a node whose GPUs are unhealthy names the node (GPUError); false runs without the nodes rule.")
	flag.StringVar(&o.gatewayURL, "gateway-url", "", "Gateway admin API for route registration (PUT/DELETE {url}/routes/{ns}/{name}); empty disables registration and the finalizer.")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve /metrics over HTTPS to bearer tokens the API server authenticates (TokenReview) and authorizes for GET on /metrics (SubjectAccessReview).")
	flag.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory with tls.crt and tls.key for --metrics-secure; empty uses a self-signed certificate.")
	flag.BoolVar(&o.pprof, "pprof", false, "Serve Go's /debug/pprof/ profiles on the health probe address (loopback use only: no authentication).")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	flag.IntVar(&o.workers, "workers", 8, "Concurrent reconciles.")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "Client-side QPS limit toward the API server.")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "Client-side burst toward the API server.")
	flag.DurationVar(&o.resync, "resync", 10*time.Minute, "How often every InferenceService is reconciled again (its cached object re-delivered; children are not); converged objects cause no writes.")
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
	flag.StringVar(&o.webhookAddr, "webhook-bind-address", "", "Address of the TLS conversion webhook (POST "+crd.WebhookPath+"); empty disables it. Needed where the CRD converts with it: the default install (manifests/components/v1beta1); not with manifests/overlays/v1alpha1.")
	flag.StringVar(&o.webhookCertDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "inferenceservice-operator-webhook"), "Directory for the webhook's self-managed CA and serving certificate ("+servingcert.CAFile+", "+servingcert.CAKeyFile+", "+servingcert.CertFile+", "+servingcert.KeyFile+"); reused while valid.")
	flag.DurationVar(&o.webhookCASync, "webhook-ca-sync-period", time.Minute, "How often the webhook's CA is checked in the CRD's caBundle (and added when missing).")
	flag.StringVar(&o.apiVersion, "api-version", "auto", "InferenceService version to watch and write status in: v1alpha1, v1beta1, or auto (v1beta1 when the API server serves it).")
	flag.DurationVar(&o.migrationPeriod, "storage-migration-period", time.Minute, "How often the leader checks the CRD's storedVersions and, after a storage version change, rewrites every InferenceService into the storage version; 0 disables it.")
	flag.StringVar(&o.gatewayParent, "gateway-parent", "", "namespace/name of the Gateway API Gateway that HTTPRoutes of models with spec.gateway attach to; empty creates no HTTPRoutes.")
	flag.StringVar(&o.inferencePool, "inference-pool", controller.InferencePoolAuto, "auto: where the Gateway API Inference Extension's InferencePool (inference.networking.k8s.io/v1) is served, a model with spec.gateway gets an InferencePool and an endpoint picker, and its HTTPRoute sends requests to the pool once the picker is ready; off: HTTPRoutes send requests to the models' Services.")
	flag.StringVar(&o.activatorService, "activator-service", controller.DefaultActivatorService, "namespace/name:port of the activator's Service, which holds requests for models scaled to zero (spec.autoscaling.minReplicas 0) and wakes them: their HTTPRoutes and status endpoints go through it. Empty: no activator; such models sleep and wake only on a change of spec.")
	flag.StringVar(&o.pickerImage, "endpoint-picker-image", reconcile.DefaultPickerImage, "Image of the models' endpoint pickers (the extension's cmd/epp, v1.5.0's flags).")
	flag.StringVar(&o.pickerClusterRole, "endpoint-picker-cluster-role", reconcile.DefaultPickerClusterRole, "ClusterRole each model's endpoint picker is bound to in its namespace (read pods and InferencePools); the install's manifests define it.")
	flag.DurationVar(&o.pickerRefresh, "endpoint-picker-refresh-metrics-interval", reconcile.DefaultPickerRefreshMetricsInterval, "How often each endpoint picker reads its pods' metrics (the picker's --refresh-metrics-interval; v1.5.0's own 50ms costs each picker about 20 millicores with no request), from 10ms to 1m; a reading four intervals old counts as stale. A change rolls each picker once.")
	flag.BoolVar(&o.networkPolicies, "network-policies", true, "Create a NetworkPolicy per model admitting to its port only its own namespace, the install's operator, activator and metrics adapter, the gateway and --network-policy-peers (a multi-node model's pods also each other, on every port), and one per endpoint picker admitting only the gateway; false creates none (those made before stay until their model goes). Enforced only where the cluster's network plugin enforces NetworkPolicy.")
	flag.StringVar(&o.npInstall, "network-policy-install-namespace", "inferenceservice-system", "Namespace of the operator, activator and metrics adapter pods (app.kubernetes.io/name inferenceservice-operator, -activator, -metrics-adapter), admitted to the models' port.")
	flag.StringVar(&o.npGateway, "network-policy-gateway", "", "The gateway's pods, admitted to the models' port and the pickers' ports: namespace or namespace:key=value,...; empty: every pod of --gateway-parent's namespace; none: no pod.")
	flag.StringVar(&o.npPeers, "network-policy-peers", "", "More callers admitted to the models' port (a Prometheus), separated by ';': namespace or namespace:key=value,...")
	flag.BoolVar(&o.serviceMonitors, "service-monitors", true, "Create a ServiceMonitor per model when the Prometheus Operator's CRD (monitoring.coreos.com/v1) is served.")
	flag.StringVar(&o.autoscaler, "autoscaler", controller.AutoscalerHPA, "What scales each model on its queue: hpa (a HorizontalPodAutoscaler on the custom metric of the model's engine's queue: num_requests_waiting for vLLM, num_queue_reqs for SGLang) or keda (a KEDA ScaledObject with a Prometheus trigger, when KEDA's keda.sh/v1alpha1 CRD is served; without it, the HPA stays and each model's AutoscalingActive condition says so). keda needs manifests/overlays/keda's RBAC.")
	flag.StringVar(&o.kedaPrometheus, "keda-prometheus-address", "", "With --autoscaler=keda, the http(s) URL of the Prometheus that scrapes the models (vllm:num_requests_waiting, sglang:num_queue_reqs), which KEDA's triggers query; required there.")
	flag.StringVar(&o.rolloutPrometheus, "rollout-prometheus-url", "", "The http(s) URL of a Prometheus that scrapes the models (their ServiceMonitors): a canary rollout's steps are judged from its queries instead of the pods' own /metrics; empty reads the pods.")
	flag.DurationVar(&o.modelServerTimeout, "model-server-timeout", modelserver.DefaultTimeout, "Timeout of one GET /v1/models or adapter unload on a model pod (asked only for models with LoRA adapters).")
	flag.DurationVar(&o.adapterLoadTimeout, "adapter-load-timeout", modelserver.DefaultLoadTimeout, "Timeout of one LoRA adapter load on a model pod (vLLM downloads and reads the adapter meanwhile).")
}

func main() {
	// `inferenceservice-operator check --url ...`: the chart's helm test, in an image without curl.
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(urlcheck.Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	o := parseFlags()
	if soft := memlimit.FromContainer(os.Getenv); soft > 0 {
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
		// $KUBECONFIG before the in-cluster ServiceAccount, as kubectl, controller-runtime and
		// the activator read it (a pod has none set, so in a cluster nothing changes).
		o.kubeconfig = os.Getenv("KUBECONFIG")
	}
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
	reg := endpoints.NewRegistry()
	m := metrics.New(reg, version)
	clientmetrics.Register(m.ClientGoOpts())

	// With leader election the controller's clients go through the write fence; the Lease, the
	// webhook's CA and metrics auth stay unfenced, for standbys.
	var fence *leader.Fence
	var wrap func(http.RoundTripper) http.RoundTripper
	if o.leaderElect {
		fence = leader.NewFence(o.renewDeadline, m.FencedWrite)
		wrap = fence.Wrap
	}
	cs, err := clients.New(cfg, wrap)
	if err != nil {
		return err
	}
	defer cs.Stop()
	if o.webhookAddr != "" {
		// Every replica serves conversions, leader or not: the API server calls whichever the
		// Service picks, and cannot read any version but storage's while none answers.
		h, tlsCfg, err := webhook.Server(ctx, cs.Dynamic, o.webhookCertDir, o.webhookCASync)
		if err != nil {
			return fmt.Errorf("conversion webhook: %w", err)
		}
		defer endpoints.Shutdown(endpoints.Listen(o.webhookAddr, h, "webhook", tlsCfg))
	}

	var gw controller.Registrar
	if o.gatewayURL != "" {
		if gw, err = controller.NewHTTPRegistrar(o.gatewayURL); err != nil {
			return err
		}
	}
	apiVersion, err := controller.WatchedVersion(o.apiVersion, cs.Kube.Discovery())
	if err != nil {
		return err
	}
	features, optional, err := controller.DiscoverFeatures(cs.Kube.Discovery(), o.serviceMonitors, o.gatewayParent)
	if err != nil {
		return err
	}
	scaledObjects, err := controller.DiscoverAutoscaler(cs.Kube.Discovery(), o.autoscaler, o.kedaPrometheus, &features)
	if err != nil {
		return err
	}
	pools, err := controller.DiscoverInferencePool(cs.Kube.Discovery(), o.inferencePool, o.pickerImage, o.pickerClusterRole, o.pickerRefresh, &features)
	if err != nil {
		return err
	}
	features.CreatingEvidenceAfter = o.creatingEvidenceAfter
	if features.Activator, features.ActivatorPort, err = controller.ParseActivatorService(o.activatorService); err != nil {
		return err
	}
	if ns := splitList(o.namespaces); features.ReferenceGrants && len(ns) > 0 && !slices.Contains(ns, features.Activator.Namespace) {
		// The grants live in the activator's namespace, which this operator does not watch.
		klog.InfoS("The activator's namespace is not watched: ReferenceGrants for routes through it are not managed", "activator", features.Activator)
		features.ReferenceGrants = false
	}
	optional = append(append(optional, scaledObjects...), pools...)
	if features.NetworkPolicies = o.networkPolicies; o.networkPolicies {
		if features.NetworkPolicy, err = reconcile.NetworkPolicyOptionsOf(o.npInstall, o.npGateway, o.npPeers, o.gatewayParent); err != nil {
			return err
		}
		optional = append(optional, reconcile.NetworkPolicyGVR)
	}
	caches := informers.New(cs.ControllerKube, cs.ControllerDynamic, informers.Options{Namespaces: splitList(o.namespaces), Resync: o.resync,
		Resource: schema.GroupVersionResource{Group: crd.Group, Version: apiVersion, Resource: crd.Plural}, Optional: optional, Workloads: features.KueueWorkloads, Nodes: o.watchNodes, APIServices: o.watchAPIServices,
		ClusterQueues: features.KueueClusterQueues, InferenceServiceIndexers: controller.InferenceServiceIndexers()})
	reg.MustRegister(metrics.NewQuotaCollector(caches))
	m.SetMaxConcurrentReconciles(o.workers)
	qcfg := queue.DefaultConfig("inferenceservice")
	qcfg.BaseDelay, qcfg.MaxDelay, qcfg.MetricsProvider = o.backoffBase, o.backoffMax, m.Workqueue
	q := queue.New(qcfg, m)

	rec := recorder.New(&events.EventSinkImpl{Interface: cs.ControllerEvents.EventsV1()},
		recorder.Options{Scheme: scheme.Scheme, Controller: controller.FieldManager, Dropped: m.EventDropped})
	go rec.Run(ctx)

	rolloutProm, err := controller.NewRolloutPrometheus(o.rolloutPrometheus)
	if err != nil {
		return err
	}
	ctrl := controller.New(controller.Config{
		Kube: cs.ControllerKube, Dynamic: cs.ControllerDynamic, Caches: caches, Queue: q, Recorder: rec, Gateway: gw,
		Metrics: m, Version: apiVersion, Features: features, BudgetContended: cs.Budget.Contended, ProgressHold: o.progressHold,
		DeregisterTimeout: o.deregisterTimeout,
		ModelServers: modelserver.New(modelserver.Options{Port: reconcile.Port, Timeout: o.modelServerTimeout,
			LoadTimeout: o.adapterLoadTimeout, Observe: m.ModelServerCall}),
		RolloutPrometheus: rolloutProm,
	})
	if err := caches.AddEventHandlers(ctrl.Handlers()); err != nil {
		return err
	}

	// With leader election, /healthz fails when this replica leads but has not renewed the lease
	// for longer than the lease plus 20s, so the kubelet restarts a wedged leader.
	var watchdog *leaderelection.HealthzAdaptor
	healthz := func(*http.Request) error { return nil }
	if o.leaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		healthz = watchdog.Check
	}
	servers := []*http.Server{endpoints.Listen(o.probeAddr, endpoints.Probes(healthz, endpoints.Synced(caches.HasSynced), o.pprof), "probes", nil)}
	if o.metricsAddr != "0" {
		h := http.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		var tlsCfg *tls.Config
		if o.metricsSecure {
			if tlsCfg, err = endpoints.ServerTLS(o.metricsCertDir, metrics.SelfSignedTLS); err != nil {
				return fmt.Errorf("metrics TLS: %w", err)
			}
			h = metrics.NewAuthorizer(cs.Kube, time.Minute, 10*time.Second).Wrap(h)
		}
		servers = append(servers, endpoints.Listen(o.metricsAddr, endpoints.Metrics(h), "metrics", tlsCfg))
	}
	defer endpoints.Shutdown(servers...)

	// Caches start before leadership so a new leader starts warm.
	caches.Start(ctx)
	if !caches.WaitForCacheSync(ctx) {
		return errors.New("caches did not sync before shutdown")
	}
	klog.InfoS("Caches synced", "version", version, "apiVersion", apiVersion, "serviceMonitors", features.ServiceMonitors, "httpRoutes", features.HTTPRoutes, "inferencePools", features.InferencePools, "scaledObjects", features.ScaledObjects, "namespaces", o.namespaces, "workers", o.workers)

	work := func(ctx context.Context) {
		if o.migrationPeriod > 0 {
			// One writer rewrites stored objects: the leader, next to the workers.
			go storage.Run(ctx, cs.ControllerDynamic, o.migrationPeriod)
		}
		if o.webhookAddr != "" {
			ns := ""
			if list := splitList(o.namespaces); len(list) > 0 {
				ns = list[0]
			}
			go webhook.RunReportingProbe(ctx, cs.Dynamic, ns, apiVersion, o.webhookCASync, m.SetConversionUp, rec)
		}
		ctrl.Run(ctx, o.workers)
	}
	if !o.leaderElect {
		work(ctx)
		return nil
	}
	return leader.Run(ctx, cs.Kube, leader.Config{
		Namespace: o.leaseNamespace, Name: o.leaseName, LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline,
		RetryPeriod: o.retryPeriod, Fence: fence, Watchdog: watchdog,
		Leading: func(l bool) { m.SetLeader(o.leaseName, l) },
	}, work)
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
