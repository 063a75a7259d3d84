package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// The load: closed-loop clients, each sending a 100-token completion (2 s at the fake
// engine's 20 ms a token) to the model's ready pods in turn, as a Service would spread them.
// With 2 slots a pod, 16 clients leave 6 waiting a pod at 2 replicas (the HPA wants 4 at a
// target of 3) and 2 at 4 replicas: under target.
const (
	loadClients = 16
	loadTokens  = 100
	loadMaxSent = 4000 // a bound on the whole test's requests, whatever happens
)

// scaleManifest is the model the autoscaling test loads, on the engine e with 2 slots a pod.
func scaleManifest(e engineCase) string {
	return `apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: busy}
spec:
  baseModel: Qwen/Qwen3-0.6B
  engine: ` + e.name + `
  gpusPerReplica: 1
  engineArgs: ["` + e.slots + `", "2"]
  autoscaling: {minReplicas: 2, maxReplicas: 4, targetQueueLength: 3, scaleDownDelaySeconds: 45}
`
}

// TestAutoscalesOnTheQueue is the acceptance on the real HPA controller, for every
// engine on its own queue: a model at 2 replicas under a bounded load that overflows its slots;
// the queue rises, the HPA scales it to its bound of 4 on the metric the operator's adapter
// serves (the engine's), the queue falls under target, the isvc reports Ready with 4; the load
// stops and it returns to 2 after the scale-down delay. The timeline (queue per pod as the HPA
// reads it, desired, ready) is logged.
func TestAutoscalesOnTheQueue(t *testing.T) {
	w := useWebhookCRD(t)
	adapter := startMetricsAdapter(t)
	adapter.waitAvailable(t)
	// The engines side by side: each its own namespace and model; the CRD and the adapter stay
	// until both have ended (a parent's cleanup waits for its parallel subtests).
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			testAutoscalesOnTheQueue(t, w, e)
		})
	}
}

func testAutoscalesOnTheQueue(t *testing.T, w *webhookInstall, e engineCase) {
	ns := env.Namespace(t)
	t.Cleanup(func() { env.Kubectl(t, w.cache, "delete", "isvc", "--all", "-n", ns, "--wait=true", "--timeout=60s") })
	applyYAMLWith(t, w.cache, ns, scaleManifest(e))
	env.WaitPhase(t, ns, "busy", "Ready", 2*time.Minute)
	if h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "busy", metav1.GetOptions{}); err != nil || h.Spec.Metrics[0].Pods.Metric.Name != e.metric() {
		t.Fatalf("the HPA (%v) does not scale on %s's queue %s", err, e.name, e.metric())
	}

	tl := &timeline{t: t, ns: ns, name: "busy", metric: e.metric(), start: time.Now()}
	stopSampling := tl.sample(3 * time.Second)
	defer stopSampling()

	load := startLoad(t, ns, "busy", loadClients)
	loadStarted := time.Now()
	testenv.Eventually(t, 3*time.Minute, "4 ready replicas, the isvc Ready with them, the queue under target", func() error {
		isvc, err := env.ISVC(ns, "busy")
		if err != nil {
			return err
		}
		last := tl.last()
		if isvc.Status.Phase != "Ready" || isvc.Status.ReadyReplicas != 4 || last.ready != 4 || len(last.queue) != 4 || last.avg() >= 3 {
			return fmt.Errorf("isvc %s ready %d; last sample %s", isvc.Status.Phase, isvc.Status.ReadyReplicas, last)
		}
		return nil
	})
	scaledUp := time.Since(loadStarted)
	sent, failed := load.stop()
	loadStopped := time.Now()
	if failed > sent/10 {
		t.Fatalf("%d of %d requests failed", failed, sent)
	}
	if peak := tl.peakAvg(); peak < 3 {
		t.Fatalf("the queue never rose above target (peak %.1f a pod): the load did not overflow the slots", peak)
	}

	testenv.Eventually(t, 3*time.Minute, "back to the minimum of 2 after the scale-down delay", func() error {
		isvc, err := env.ISVC(ns, "busy")
		if err != nil {
			return err
		}
		if last := tl.last(); isvc.Status.Phase != "Ready" || isvc.Status.Replicas != 2 || last.desired != 2 {
			return fmt.Errorf("isvc %s replicas %d; last sample %s", isvc.Status.Phase, isvc.Status.Replicas, last)
		}
		return nil
	})
	stopSampling()
	t.Logf("load: %d clients, %d requests (%d failed); scaled up to 4 ready %s after the load started; back to 2 %s after it stopped (delay 45s, HPA sync 15s)",
		loadClients, sent, failed, scaledUp.Round(time.Second), time.Since(loadStopped).Round(time.Second))
	t.Logf("timeline (queue per pod as the custom metrics API serves it):\n%s", tl)
	t.Logf("kubectl get hpa:\n%s", env.Kubectl(t, w.cache, "get", "hpa", "-n", ns, "busy"))
}

// applyYAMLWith is applyYAML through kubectl with extra flags (a cache directory of its own,
// for the v1beta1 install's discovery).
func applyYAMLWith(t *testing.T, flag, ns, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, flag, "apply", "-n", ns, "-f", f)
}

type load struct {
	*testenv.Load
	cancel context.CancelFunc
	wg     sync.WaitGroup // the refresher
}

// startLoad runs the clients against the model's ready pods (their IPs, refreshed every
// second) until stop, loadMaxSent requests, or five minutes.
func startLoad(t *testing.T, ns, name string, clients int) *load {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	l := &load{cancel: cancel}
	var ips atomic.Pointer[[]string]
	ips.Store(&[]string{})
	refresh := func() {
		pods, err := readyModelPods(t, ns, name)
		if err != nil {
			return
		}
		list := make([]string, 0, len(pods))
		for _, p := range pods {
			list = append(list, p.Status.PodIP)
		}
		sort.Strings(list)
		ips.Store(&list)
	}
	refresh()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				refresh()
			}
		}
	}()
	l.Load = testenv.StartLoad(ctx, testenv.LoadOptions{
		Clients: clients,
		Body:    fmt.Sprintf(`{"model":"Qwen/Qwen3-0.6B","prompt":"Kubernetes operators are","max_tokens":%d}`, loadTokens),
		MaxSent: loadMaxSent,
		IPs:     func() []string { return *ips.Load() },
	})
	return l
}

func (l *load) stop() (sent, failed int64) {
	l.cancel()
	l.wg.Wait()
	return l.Stop()
}

type qsample struct {
	at              time.Duration
	queue           map[string]float64
	desired, ready  int32
	phase           string
	metricAvailable bool
}

func (s qsample) avg() float64 {
	if len(s.queue) == 0 {
		return 0
	}
	sum := 0.0
	for _, v := range s.queue {
		sum += v
	}
	return sum / float64(len(s.queue))
}

func (s qsample) String() string {
	pods := make([]string, 0, len(s.queue))
	for p := range s.queue {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	q := make([]string, 0, len(pods))
	for _, p := range pods {
		q = append(q, fmt.Sprintf("%s=%g", p[strings.LastIndex(p, "-")+1:], s.queue[p]))
	}
	return fmt.Sprintf("%6.0fs  queue/pod %-40s avg %4.1f  desired %d  ready %d  isvc %s", s.at.Seconds(), strings.Join(q, " "), s.avg(), s.desired, s.ready, s.phase)
}

// timeline samples what the HPA reads and decides, and what the isvc says.
type timeline struct {
	t        *testing.T
	ns, name string
	metric   string // the queue's name in the custom metrics API
	selector string // the metric's label selector as the HPA gives it (metricLabelSelector); "" for none
	start    time.Time
	mu       sync.Mutex
	samples  []qsample
}

func (tl *timeline) sample(every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s := tl.read(ctx)
			tl.mu.Lock()
			tl.samples = append(tl.samples, s)
			tl.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

func (tl *timeline) read(ctx context.Context) qsample {
	s := qsample{at: time.Since(tl.start), queue: map[string]float64{}}
	raw, err := env.Kube.CoreV1().RESTClient().Get().
		AbsPath("/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+tl.ns+"/pods/*/"+tl.metric).
		Param("labelSelector", kinds.InstanceLabel+"="+tl.name).Param("metricLabelSelector", tl.selector).DoRaw(ctx)
	if err == nil {
		var list struct {
			Items []struct {
				DescribedObject struct{ Name string } `json:"describedObject"`
				Value           resource.Quantity     `json:"value"`
			} `json:"items"`
		}
		if json.Unmarshal(raw, &list) == nil {
			s.metricAvailable = true
			for _, it := range list.Items {
				s.queue[it.DescribedObject.Name] = it.Value.AsApproximateFloat64()
			}
		}
	}
	if h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(tl.ns).Get(ctx, tl.name, metav1.GetOptions{}); err == nil {
		s.desired = h.Status.DesiredReplicas
	}
	if d, err := env.Kube.AppsV1().Deployments(tl.ns).Get(ctx, tl.name, metav1.GetOptions{}); err == nil {
		s.ready = d.Status.ReadyReplicas
	}
	if isvc, err := env.ISVC(tl.ns, tl.name); err == nil {
		s.phase = string(isvc.Status.Phase)
	}
	return s
}

func (tl *timeline) last() qsample {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.samples) == 0 {
		return qsample{}
	}
	return tl.samples[len(tl.samples)-1]
}

func (tl *timeline) peakAvg() float64 {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	peak := 0.0
	for _, s := range tl.samples {
		peak = max(peak, s.avg())
	}
	return peak
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	lines := make([]string, 0, len(tl.samples))
	for _, s := range tl.samples {
		lines = append(lines, s.String())
	}
	return strings.Join(lines, "\n")
}
