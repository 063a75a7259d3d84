// The I/O half: what the walk reads, listed from the API server by the plugin's own
// credentials (reads only), and the crashed container's previous log.

package walk

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// Source is where the walk reads: the cluster's clients and where the operator runs.
type Source struct {
	Kube kubernetes.Interface
	Dyn  dynamic.Interface
	// OperatorNamespace and LeaseName locate the operator as manifests/ installs it.
	OperatorNamespace, LeaseName string
	// LogLines bounds the previous log's tail.
	LogLines int64
	Now      func() time.Time
}

// operatorLabel selects the operator's pods (manifests/operator/deployment.yaml).
const operatorLabel = "app.kubernetes.io/name=inferenceservice-operator"

// maxLogBytes bounds the previous log read, as the operator bounds its own (lastwords).
const maxLogBytes = 16 << 10

// Why reads one isvc and its children and walks them, the crashed container's log included.
func (s Source) Why(ctx context.Context, ns, name string) (Report, error) {
	o, err := s.objects(ctx, ns, name)
	if err != nil {
		return Report{}, err
	}
	r := Build(o)
	if c := r.Crashed; c != nil {
		tail, err := s.runLog(ctx, c.run)
		if err != nil {
			c.LogError = err.Error()
		} else {
			c.Log, c.Decisive = Tail(tail, c.run, int(s.LogLines))
		}
	}
	return r, nil
}

func (s Source) objects(ctx context.Context, ns, name string) (Objects, error) {
	u, err := s.Dyn.Resource(crd.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Objects{}, fmt.Errorf("inferenceservice %s/%s: %w", ns, name, err)
	}
	isvc, err := crd.FromUnstructured(u)
	if err != nil {
		return Objects{}, fmt.Errorf("inferenceservice %s/%s: %w", ns, name, err)
	}
	o := Objects{ISVC: isvc, Now: s.Now(), Operator: s.operator(ctx)}
	if o.HPA, err = s.hpa(ctx, ns, name); err != nil {
		return Objects{}, err
	}
	d, err := s.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return Objects{}, fmt.Errorf("deployment %s/%s: %w", ns, name, err)
	default:
		o.Deployment = d
	}
	if o.Deployment == nil {
		// A multi-node model's child; not found, or LeaderWorkerSet not served: none.
		l, err := s.Dyn.Resource(reconcile.LeaderWorkerSetGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return Objects{}, fmt.Errorf("leaderworkerset %s/%s: %w", ns, name, err)
		default:
			o.LeaderWorkerSet = l
		}
	}
	// The gateway layer: the HTTPRoute and the InferencePool where their APIs are served (a
	// 404 is "none"), and the picker's Deployment.
	for _, g := range []struct {
		gvr  schema.GroupVersionResource
		into **unstructured.Unstructured
	}{{reconcile.HTTPRouteGVR, &o.HTTPRoute}, {reconcile.InferencePoolGVR, &o.InferencePool}} {
		u, err := s.Dyn.Resource(g.gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err): // the Routed condition still says it
		case err != nil:
			return Objects{}, fmt.Errorf("%s %s/%s: %w", g.gvr.Resource, ns, name, err)
		default:
			*g.into = u
		}
	}
	if o.InferencePool != nil {
		p, err := s.Kube.AppsV1().Deployments(ns).Get(ctx, reconcile.PickerName(name), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return Objects{}, fmt.Errorf("deployment %s/%s: %w", ns, reconcile.PickerName(name), err)
		default:
			o.Picker = p
		}
	}
	sel := metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=" + name}
	rss, err := s.Kube.AppsV1().ReplicaSets(ns).List(ctx, sel)
	if err != nil {
		return Objects{}, fmt.Errorf("replicasets in %s: %w", ns, err)
	}
	for i := range rss.Items {
		o.ReplicaSets = append(o.ReplicaSets, &rss.Items[i])
	}
	pods, err := s.Kube.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		return Objects{}, fmt.Errorf("pods in %s: %w", ns, err)
	}
	for i := range pods.Items {
		o.Pods = append(o.Pods, &pods.Items[i])
	}
	evs, err := s.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Objects{}, fmt.Errorf("events in %s: %w", ns, err)
	}
	o.Events = evs.Items
	return o, nil
}

// hpa is the model's HPA: the operator's (named as the isvc), else KEDA's.
func (s Source) hpa(ctx context.Context, ns, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	for _, n := range []string{name, "keda-hpa-" + name} {
		h, err := s.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("horizontalpodautoscaler %s/%s: %w", ns, n, err)
		}
		return h, nil
	}
	return nil, nil
}

// operator reads the leader Lease and the operator's pods; a denied read is told, not fatal:
// the walk itself needs neither.
func (s Source) operator(ctx context.Context) Operator {
	where := s.OperatorNamespace
	var lease *coordinationv1.Lease
	l, err := s.Kube.CoordinationV1().Leases(where).Get(ctx, s.LeaseName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		err = nil
	case err == nil:
		lease = l
	}
	var pods []*corev1.Pod
	if err == nil {
		var list *corev1.PodList
		list, err = s.Kube.CoreV1().Pods(where).List(ctx, metav1.ListOptions{LabelSelector: operatorLabel})
		if err == nil {
			for i := range list.Items {
				pods = append(pods, &list.Items[i])
			}
		}
	}
	return OperatorState(lease, pods, where, err, s.Now())
}

// runLog is the crashed run's log with timestamps, bounded as the operator bounds its own
// read (lastwords): `kubectl logs --previous --timestamps --tail=50`.
func (s Source) runLog(ctx context.Context, run reconcile.CrashedRun) (string, error) {
	b, err := s.Kube.CoreV1().Pods(run.Namespace).GetLogs(run.Pod, &corev1.PodLogOptions{Container: run.Container, Previous: run.Previous,
		Timestamps: true, TailLines: ptr.To(max(s.LogLines, logReadLines)), LimitBytes: ptr.To[int64](maxLogBytes)}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the log: %w", err)
	}
	return string(b), nil
}

// logReadLines is how much of the log is read for the decisive line, which may be a root
// cause printed above the last lines.
const logReadLines = 50

// Tail is the last n of run's lines in a log read with timestamps (reconcile.RunLines: the
// stamps removed, other runs' lines dropped), without colour codes, and the decisive line, the
// operator's.
func Tail(log string, run reconcile.CrashedRun, n int) (lines []string, decisive string) {
	lines = reconcile.RunLines(strings.TrimRight(log, "\n"), run)
	decisive, _ = reconcile.LastWordsOf(log, run)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = colourCode.ReplaceAllString(l, "")
	}
	return lines, decisive
}

// colourCode is a terminal colour code: vLLM v0.11 colours its process prefixes, which the
// screen quotes as text (a pipe or a file would show the codes).
var colourCode = regexp.MustCompile("\x1b\\[[0-9;]*m")

// List reads every isvc in ns (all namespaces when empty) with its HPA's queue reading.
func (s Source) List(ctx context.Context, ns string) ([]Row, error) {
	ul, err := s.Dyn.Resource(crd.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("inferenceservices: %w", err)
	}
	hpas, err := s.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("horizontalpodautoscalers: %w", err)
	}
	byName := map[string]*autoscalingv2.HorizontalPodAutoscaler{}
	for i := range hpas.Items {
		h := &hpas.Items[i]
		byName[h.Namespace+"/"+h.Name] = h
	}
	rows := []Row{}
	for i := range ul.Items {
		isvc, err := crd.FromUnstructured(&ul.Items[i])
		if err != nil {
			return nil, fmt.Errorf("inferenceservice %s/%s: %w", ul.Items[i].GetNamespace(), ul.Items[i].GetName(), err)
		}
		h := byName[isvc.Namespace+"/"+isvc.Name]
		if h == nil {
			h = byName[isvc.Namespace+"/keda-hpa-"+isvc.Name]
		}
		rows = append(rows, RowOf(isvc, h))
	}
	sort.Slice(rows, func(a, b int) bool {
		if rows[a].Namespace != rows[b].Namespace {
			return rows[a].Namespace < rows[b].Namespace
		}
		return rows[a].Name < rows[b].Name
	})
	return rows, nil
}

// RowOf is one model's row: GPUs asked (spec.replicas x gpusPerReplica) and serving (ready
// replicas x gpusPerReplica), the queue as its HPA (nil if none) last read it against the target.
func RowOf(isvc *crd.InferenceService, h *autoscalingv2.HorizontalPodAutoscaler) Row {
	g := isvc.Spec.GPUs()
	r := Row{Namespace: isvc.Namespace, Name: isvc.Name, Model: isvc.Spec.Model, Phase: string(isvc.Status.Phase), Reason: isvc.Status.Reason,
		Replicas: isvc.Spec.Replicas, Ready: isvc.Status.ReadyReplicas, GPUsRequested: isvc.Spec.Replicas * g, GPUsReady: isvc.Status.ReadyReplicas * g,
		GPUsPerReplica: g, Generation: isvc.Generation, ObservedGeneration: isvc.Status.ObservedGeneration}
	if h != nil {
		l := hpaLayer(h)
		r.Queue, r.Target, r.HPA = l.Value, l.Target, l.Name
	}
	return r
}
