// Command inferenceservice-metrics-adapter serves vLLM's queue as the custom metrics API the
// HPA controller reads: podmetrics reads each ready model pod's /metrics, custommetrics serves
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
}

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
	fs.StringVar(&o.service, "apiservice-service", "inferenceservice-system/inferenceservice-metrics-adapter", "NAMESPACE/NAME of the Service the APIServices point at.")
	fs.Int32Var(&o.port, "apiservice-port", 443, "The Service's port the aggregator dials.")
	fs.DurationVar(&o.registerEvery, "apiservice-resync", time.Minute, "How often the APIServices are checked again (one restored by hand, or freed by another component).")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	backend, err := backendOf(o.service, o.port)
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
	adapter.WithCustomMetrics(&custommetrics.Provider{Pods: lister, Readings: scraper, Now: time.Now})
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
		go keepRegistered(ctx, dyn, backend, o.registerEvery)
	}
	klog.InfoS("Serving custom.metrics.k8s.io", "metric", custommetrics.Metric, "scrapePeriod", o.period, "concurrency", o.concurrency)
	return adapter.Run(ctx)
}

// backendOf reads --apiservice-service and --apiservice-port.
func backendOf(service string, port int32) (custommetrics.Backend, error) {
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

var apiServiceInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "inferenceservice", Subsystem: "metrics_adapter", Name: "apiservice_info",
	Help: "Who serves each custom.metrics.k8s.io version: served_by is \"self\" when this adapter's APIService does, else the other component's Service.",
}, []string{"apiservice", "served_by"})

func init() { legacyregistry.RawMustRegister(apiServiceInfo) }

// keepRegistered checks the APIServices now and every period: a version another component
// serves is logged once per change and shown on /metrics, never replaced.
func keepRegistered(ctx context.Context, dyn dynamic.Interface, b custommetrics.Backend, every time.Duration) {
	last := map[string]string{}
	for {
		regs, err := custommetrics.Register(ctx, dyn, b)
		if err != nil {
			klog.ErrorS(err, "Registering custom.metrics.k8s.io")
		}
		for _, r := range regs {
			by := "self"
			if r.Action == "left" {
				by = r.ServedBy
			}
			if last[r.Name] != by {
				if by == "self" {
					klog.InfoS("APIService registered", "apiservice", r.Name, "action", r.Action)
				} else {
					klog.InfoS("APIService served by another component: left untouched; the HPAs read that component's metric", "apiservice", r.Name, "servedBy", by)
				}
				if old, ok := last[r.Name]; ok {
					apiServiceInfo.DeleteLabelValues(r.Name, old)
				}
				apiServiceInfo.WithLabelValues(r.Name, by).Set(1)
				last[r.Name] = by
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
