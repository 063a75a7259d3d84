// Command inferenceservice-metrics-adapter serves each model's engine's queue and KV-cache use,
// and each pod's p95 time to first token over a window, as the custom metrics API the HPA controller reads: podmetrics reads each ready model pod's /metrics, custommetrics serves
// it through sigs.k8s.io/custom-metrics-apiserver. It ships in the operator's image as a second
// binary and runs as its own Deployment, so the operator does not carry an API server's weight.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/example/inferenceservice-operator/controller/process/servingcert"
	"github.com/example/inferenceservice-operator/metrics/custommetrics"
	"github.com/example/inferenceservice-operator/metrics/podmetrics"
)

func main() {
	if err := run(); err != nil {
		klog.ErrorS(err, "Metrics adapter stopped")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

type options struct {
	period, timeout, registerEvery time.Duration
	concurrency, nsConcurrency     int
	register                       bool
	service                        string
	port                           int32
	owner                          string
	certSecret                     string
	issueCert                      bool
}

// serviceName is the Service (and ServiceAccount) the install names the adapter's.
const serviceName = "inferenceservice-metrics-adapter"

func run() error {
	logs.InitLogs()
	defer logs.FlushLogs()

	adapter := &basecmd.AdapterBase{Name: "inferenceservice-metrics-adapter"}
	var o options
	fs := adapter.Flags()
	fs.DurationVar(&o.period, "scrape-period", 10*time.Second, "How often every ready model pod's /metrics is read (the HPA controller syncs every 15s).")
	fs.DurationVar(&o.timeout, "scrape-timeout", 2*time.Second, "How long one pod may take to answer before its reading is dropped.")
	fs.IntVar(&o.concurrency, "scrape-concurrency", 8, "Reads in flight at once of pods that answered their last read; pods yet to answer (new, or failed) have four times as many of their own.")
	fs.IntVar(&o.nsConcurrency, "scrape-namespace-concurrency", 0, "Reads in flight at once in one namespace, in each of those two pools (0: half of --scrape-concurrency).")
	fs.BoolVar(&o.register, "register-apiservice", true, "Create the custom.metrics.k8s.io APIServices when absent and keep those this adapter created; never change another component's.")
	fs.StringVar(&o.service, "apiservice-service", "", "NAMESPACE/NAME of the Service the APIServices point at. Empty: "+serviceName+" in the adapter's own namespace ($POD_NAMESPACE, the downward API), wherever it is installed.")
	fs.Int32Var(&o.port, "apiservice-port", 443, "The Service's port the aggregator dials.")
	fs.StringVar(&o.owner, "apiservice-owner", serviceName, "The install's ClusterRole that owns the APIServices (and the serving certificate's Secret) the adapter creates, so the garbage collector removes them when the install is removed.")
	fs.StringVar(&o.certSecret, "serving-cert-secret", serviceName+"-tls", "Secret in the Service's namespace holding the serving certificate every replica serves (tls.crt, tls.key) and its CA (ca.crt), the APIServices' caBundle. Empty: each replica serves a self-signed certificate and the APIServices skip TLS verification (the shipped admission policy refuses that).")
	fs.BoolVar(&o.issueCert, "issue-serving-cert", true, "The adapter creates the serving certificate's Secret and renews it 30 days before it expires; false: another issuer writes it (cert-manager, manifests/overlays/cert-manager) and the adapter only reads it.")
	fs.DurationVar(&o.registerEvery, "apiservice-resync", time.Minute, "How often the APIServices are checked again (one restored by hand, or freed by another component).")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	for name, path := range kubeconfigDefaults(os.Getenv("KUBECONFIG"), func(name string) bool {
		f := fs.Lookup(name)
		return f == nil || f.Changed
	}) {
		if err := fs.Set(name, path); err != nil {
			return err
		}
	}
	backend, err := backendOf(o.service, os.Getenv("POD_NAMESPACE"), o.port)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cfg, err := adapter.ClientConfig()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Only the operator's pods, each cached as far as the scraper reads it.
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = podmetrics.ManagedBySelector }),
		informers.WithTransform(podmetrics.StripPod))
	pods := factory.Core().V1().Pods()
	podInformer := pods.Informer()
	lister := pods.Lister()

	// The owner chain of each pod, so only the operator's children's pods are read.
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, lwsErr := kube.Discovery().ServerResourcesForGroupVersion(podmetrics.LWSGroupVersion)
	owners := podmetrics.NewOwnerCaches(md, lister, lwsErr == nil)
	klog.InfoS("Reading only pods an InferenceService's children control", "leaderWorkerSetServed", lwsErr == nil)

	scraper, err := podmetrics.New(podmetrics.Config{
		Period: o.period, Timeout: o.timeout, Concurrency: o.concurrency, NamespaceConcurrency: o.nsConcurrency,
		Pods:   func() ([]*corev1.Pod, error) { return lister.List(labels.Everything()) },
		Owners: owners,
	}, registerer{})
	if err != nil {
		return err
	}
	reg := &registration{kube: kube, backend: backend, ownerName: o.owner, certDir: adapter.SecureServing.ServerCert.CertDirectory}
	if o.certSecret != "" {
		if reg.certDir == "" {
			return fmt.Errorf("--serving-cert-secret needs --cert-dir, where the certificate is written for the server to load")
		}
		reg.certs = &servingcert.Source{Secrets: kube.CoreV1(), Namespace: backend.Namespace, Name: o.certSecret,
			DNSNames: servingcert.DNSNames(backend.Namespace, backend.Name), Issue: o.issueCert, Now: time.Now}
		// Served from the first request on: the server loads these files (set before
		// adapter.Server builds its serving config), and reloads them when a renewal rewrites them.
		if err := reg.refreshCert(ctx); err != nil {
			return err
		}
		adapter.SecureServing.ServerCert.CertKey.CertFile, adapter.SecureServing.ServerCert.CertKey.KeyFile = reg.certFile, reg.keyFile
	}

	adapter.WithCustomMetrics(custommetrics.NewProvider(lister, scraper, time.Now))
	server, err := adapter.Server()
	if err != nil {
		return err
	}
	// Not ready until every model pod has been read once: an HPA reading sooner sees none.
	if err := server.GenericAPIServer.AddReadyzChecks(healthz.NamedCheck("scrape-first-pass", func(*http.Request) error { return scraper.Ready() })); err != nil {
		return err
	}

	factory.Start(ctx.Done())
	owners.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced, owners.HasSynced) {
		return fmt.Errorf("pod and owner caches never synced")
	}
	go scraper.Run(ctx)
	if o.register {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		reg.dyn = dyn
		go reg.keep(ctx, o.registerEvery)
	}
	klog.InfoS("Serving custom.metrics.k8s.io", "metrics", custommetrics.Metrics(), "scrapePeriod", o.period, "concurrency", o.concurrency)
	return adapter.Run(ctx)
}

// backendOf reads --apiservice-service (empty: the adapter's Service in podNamespace) and
// --apiservice-port.
func backendOf(service, podNamespace string, port int32) (custommetrics.Backend, error) {
	if service == "" {
		if podNamespace == "" {
			return custommetrics.Backend{}, fmt.Errorf("no namespace for the APIServices' Service: set POD_NAMESPACE from the downward API (metadata.namespace), or --apiservice-service")
		}
		service = podNamespace + "/" + serviceName
	}
	ns, name, ok := strings.Cut(service, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return custommetrics.Backend{}, fmt.Errorf("--apiservice-service %q: want NAMESPACE/NAME", service)
	}
	if port < 1 || port > 65535 {
		return custommetrics.Backend{}, fmt.Errorf("--apiservice-port %d: want 1-65535", port)
	}
	return custommetrics.Backend{Namespace: ns, Name: name, Port: port}, nil
}

// registerer puts the scraper's metrics on the API server's /metrics (component-base's
// registry), behind the same delegated authentication as the API.
type registerer struct{}

func (registerer) Register(c prometheus.Collector) error {
	legacyregistry.RawMustRegister(c)
	return nil
}
func (registerer) MustRegister(cs ...prometheus.Collector) {
	legacyregistry.RawMustRegister(cs...)
}
func (registerer) Unregister(prometheus.Collector) bool { return false }

var apiServiceInfo = custommetrics.NewAPIServiceInfo()

func init() { legacyregistry.RawMustRegister(apiServiceInfo) }

// registration keeps the serving certificate and the APIServices: the pair is read (issued,
// renewed) and written for the server, the owner's UID read, and the APIServices registered.
type registration struct {
	kube      kubernetes.Interface
	dyn       dynamic.Interface
	backend   custommetrics.Backend
	ownerName string
	// certs is nil where each replica serves its own self-signed certificate.
	certs             *servingcert.Source
	certDir           string
	certFile, keyFile string
	last              map[string]string
}

// owner is the install's ClusterRole, which the garbage collector removes the adapter's
// objects with; absent, the install is being removed and nothing is registered.
func (r *registration) owner(ctx context.Context) (metav1.OwnerReference, error) {
	cr, err := r.kube.RbacV1().ClusterRoles().Get(ctx, r.ownerName, metav1.GetOptions{})
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("owner ClusterRole %s: %w", r.ownerName, err)
	}
	return metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: cr.Name, UID: cr.UID}, nil
}

// refreshCert reads the serving certificate's Secret (issuing or renewing it where the adapter
// is the issuer) and writes the pair where the server loads it.
func (r *registration) refreshCert(ctx context.Context) error {
	if r.certs.Issue {
		owner, err := r.owner(ctx)
		if err != nil {
			return err
		}
		r.certs.Owner = &owner
	}
	pair, action, err := r.certs.Get(ctx)
	if err != nil {
		return err
	}
	certFile, keyFile, changed, err := servingcert.WriteFiles(r.certDir, pair)
	if err != nil {
		return err
	}
	if action != "unchanged" || changed {
		klog.InfoS("Serving certificate", "secret", r.certs.Namespace+"/"+r.certs.Name, "action", action, "filesChanged", changed)
	}
	r.certFile, r.keyFile, r.backend.CABundle = certFile, keyFile, pair.CA
	return nil
}

// keep checks the certificate and the APIServices now and every period: a version another
// component serves is logged once per change and shown on /metrics, never replaced.
func (r *registration) keep(ctx context.Context, every time.Duration) {
	r.last = map[string]string{}
	for {
		if err := r.pass(ctx); err != nil {
			klog.ErrorS(err, "Registering custom.metrics.k8s.io")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (r *registration) pass(ctx context.Context) error {
	if r.certs != nil {
		if err := r.refreshCert(ctx); err != nil {
			return err
		}
	}
	owner, err := r.owner(ctx)
	if err != nil {
		return err
	}
	regs, err := custommetrics.Register(ctx, r.dyn, r.backend, owner)
	r.report(regs)
	return err
}

// report logs and shows who serves each version, once per change.
func (r *registration) report(regs []custommetrics.Registration) {
	for _, reg := range regs {
		by := "self"
		if reg.Action == "left" {
			by = reg.ServedBy
		}
		if r.last[reg.Name] == by {
			continue
		}
		if by == "self" {
			klog.InfoS("APIService registered", "apiservice", reg.Name, "action", reg.Action)
		} else {
			klog.InfoS("APIService served by another component: left untouched; the HPAs read that component's metric", "apiservice", reg.Name, "servedBy", by)
		}
		if old, ok := r.last[reg.Name]; ok {
			apiServiceInfo.DeleteLabelValues(reg.Name, old)
		}
		apiServiceInfo.WithLabelValues(reg.Name, by).Set(1)
		r.last[reg.Name] = by
	}
}

// kubeconfigFlags are the adapter's clients: the lister's and the delegated authentication's
// and authorization's. Each reads the in-cluster ServiceAccount unless its flag names a file.
var kubeconfigFlags = []string{"lister-kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig"}

// kubeconfigDefaults: $KUBECONFIG (one file) is every client's kubeconfig whose flag was not
// given, as the operator and kubectl read it; a pod has none set, so in a cluster nothing
// changes. A list of files is left alone: each flag takes one.
func kubeconfigDefaults(env string, given func(flag string) bool) map[string]string {
	if env == "" || len(filepath.SplitList(env)) != 1 {
		return nil
	}
	out := map[string]string{}
	for _, name := range kubeconfigFlags {
		if !given(name) {
			out[name] = env
		}
	}
	return out
}
