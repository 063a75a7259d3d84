package reconcile

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// Each child kind has a pair: xDrifted compares only the fields the operator owns (never what
// the API server defaults or other controllers write back, or the operator would loop), and
// setX writes those fields onto a copy of the live object. A test checks that after setX,
// xDrifted is false.

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func mergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = make(map[string]string, len(want))
	}
	maps.Copy(have, want)
	return have
}

// wantedReplicas decides the Deployment's replica count without fighting the HPA. A change of
// spec.replicas moves the HPA's bounds; the count the HPA chose is kept, clamped into them,
// since each pod it drops is a loaded model server. The user's count applies when the HPA has
// not moved the count away from the last one applied (the annotation records it), and a raise
// is also a floor: asking for more never gets fewer. Otherwise the spec's count is applied only
// to a live count outside the bounds (someone scaled it by hand).
//
// Under v1beta1 autoscaling there is no user's count: a change of the bounds only moves the
// count back inside them.
func wantedReplicas(live *appsv1.Deployment, sc Scale) (int32, bool) {
	return wantedCount(ptr.Deref(live.Spec.Replicas, 1), live.Annotations[ReplicasAnnotation], sc)
}

// wantedCount is wantedReplicas for any scalable child: cur its live count, applied its
// ReplicasAnnotation.
func wantedCount(cur int32, appliedAnnotation string, sc Scale) (int32, bool) {
	want := cur
	switch applied, err := strconv.Atoi(appliedAnnotation); {
	case sc.Fixed && (err != nil || int32(applied) != sc.Replicas):
		if err == nil && int32(applied) == cur {
			want = sc.Replicas // the HPA has not taken over: the user's count
		} else {
			want = min(max(cur, sc.Replicas), sc.Max) // the HPA's, raised to the user's
		}
	case sc.Fixed && (cur < sc.Min || cur > sc.Max):
		want = sc.Replicas
	default:
		want = min(max(cur, sc.Min), sc.Max)
	}
	return want, want != cur
}

func probeDrifted(have, want *corev1.Probe) bool {
	if have == nil || want == nil {
		return (have == nil) != (want == nil)
	}
	if have.HTTPGet == nil || want.HTTPGet == nil {
		return (have.HTTPGet == nil) != (want.HTTPGet == nil)
	}
	return have.HTTPGet.Path != want.HTTPGet.Path || have.HTTPGet.Port != want.HTTPGet.Port ||
		have.PeriodSeconds != want.PeriodSeconds || have.FailureThreshold != want.FailureThreshold ||
		have.TimeoutSeconds != want.TimeoutSeconds
}

func resourcesDrifted(have, want corev1.ResourceList) bool {
	if len(have) != len(want) {
		return true
	}
	for k, w := range want {
		if h, ok := have[k]; !ok || h.Cmp(w) != 0 {
			return true
		}
	}
	return false
}

func containerDrifted(have, want *corev1.Container) bool {
	if have.Image != want.Image || !slices.Equal(have.Command, want.Command) || len(have.Args) != len(want.Args) || len(have.Ports) != len(want.Ports) {
		return true
	}
	for i := range want.Args {
		if have.Args[i] != want.Args[i] {
			return true
		}
	}
	for i := range want.Ports {
		h, w := have.Ports[i], want.Ports[i]
		if h.Name != w.Name || h.ContainerPort != w.ContainerPort || h.Protocol != w.Protocol {
			return true
		}
	}
	if resourcesDrifted(have.Resources.Limits, want.Resources.Limits) ||
		resourcesDrifted(have.Resources.Requests, want.Resources.Requests) {
		return true
	}
	if probeDrifted(have.StartupProbe, want.StartupProbe) || probeDrifted(have.ReadinessProbe, want.ReadinessProbe) ||
		probeDrifted(have.LivenessProbe, want.LivenessProbe) {
		return true
	}
	for _, m := range want.VolumeMounts {
		if !hasMount(have.VolumeMounts, m) {
			return true
		}
	}
	return false
}

// envDrifted: a variable the operator sets differs or is missing, or one it set before (prev,
// the live EnvAnnotation) is still there though the spec dropped it. Others' variables are not
// compared.
func envDrifted(have, want []corev1.EnvVar, prev string) bool {
	for _, w := range want {
		i := slices.IndexFunc(have, func(h corev1.EnvVar) bool { return h.Name == w.Name })
		if i < 0 || !equality.Semantic.DeepEqual(have[i], w) {
			return true
		}
	}
	for _, name := range splitNames(prev) {
		if !slices.ContainsFunc(want, func(w corev1.EnvVar) bool { return w.Name == name }) &&
			slices.ContainsFunc(have, func(h corev1.EnvVar) bool { return h.Name == name }) {
			return true
		}
	}
	return false
}

// setEnv sets the operator's variables in have by name (others keep their place), and removes
// the ones it set before (prev) that want no longer has.
func setEnv(have, want []corev1.EnvVar, prev string) []corev1.EnvVar {
	out := slices.DeleteFunc(slices.Clone(have), func(h corev1.EnvVar) bool {
		return slices.Contains(splitNames(prev), h.Name) && !slices.ContainsFunc(want, func(w corev1.EnvVar) bool { return w.Name == h.Name })
	})
	for _, w := range want {
		if i := slices.IndexFunc(out, func(h corev1.EnvVar) bool { return h.Name == w.Name }); i >= 0 {
			out[i] = w
		} else {
			out = append(out, w)
		}
	}
	return out
}

func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func hasMount(ms []corev1.VolumeMount, want corev1.VolumeMount) bool {
	for _, m := range ms {
		if m.Name == want.Name && m.MountPath == want.MountPath {
			return true
		}
	}
	return false
}

// hasVolume checks the operator's emptyDir volumes (the only kind it adds) without reflection.
func hasVolume(vs []corev1.Volume, want corev1.Volume) bool {
	for _, v := range vs {
		if v.Name != want.Name {
			continue
		}
		h, w := v.EmptyDir, want.EmptyDir
		if h == nil || w == nil {
			return h == w && equality.Semantic.DeepEqual(v.VolumeSource, want.VolumeSource)
		}
		return h.Medium == w.Medium && (h.SizeLimit == nil) == (w.SizeLimit == nil) &&
			(h.SizeLimit == nil || h.SizeLimit.Cmp(*w.SizeLimit) == 0)
	}
	return false
}

func deploymentDrifted(live, want *appsv1.Deployment, sc Scale) bool {
	if !hasLabels(live.Labels, want.Labels) || live.Annotations[ReplicasAnnotation] != want.Annotations[ReplicasAnnotation] ||
		live.Annotations[EnvAnnotation] != want.Annotations[EnvAnnotation] || live.Annotations[RaisedAnnotation] != want.Annotations[RaisedAnnotation] {
		return true
	}
	if _, change := wantedReplicas(live, sc); change {
		return true
	}
	return templateDrifted(&live.Spec.Template, &want.Spec.Template, live.Annotations[EnvAnnotation])
}

// templateDrifted compares the owned fields of a pod template: its labels, priority class,
// service links, the model server container and the operator's volumes. prevEnv is the live
// object's EnvAnnotation.
func templateDrifted(lt, wt *corev1.PodTemplateSpec, prevEnv string) bool {
	if !hasLabels(lt.Labels, wt.Labels) || lt.Spec.PriorityClassName != wt.Spec.PriorityClassName ||
		ptr.Deref(lt.Spec.EnableServiceLinks, true) != ptr.Deref(wt.Spec.EnableServiceLinks, true) {
		return true
	}
	i := slices.IndexFunc(lt.Spec.Containers, func(c corev1.Container) bool { return c.Name == kinds.ContainerName })
	if i < 0 || containerDrifted(&lt.Spec.Containers[i], &wt.Spec.Containers[0]) ||
		envDrifted(lt.Spec.Containers[i].Env, wt.Spec.Containers[0].Env, prevEnv) {
		return true
	}
	for _, v := range wt.Spec.Volumes {
		if !hasVolume(lt.Spec.Volumes, v) {
			return true
		}
	}
	if kinds.HasAdaptersGate(&lt.Spec) != kinds.HasAdaptersGate(&wt.Spec) {
		return true
	}
	// Volumes the operator adds only for some specs go when the spec no longer asks for them:
	// the cache with spec.cache, and an earlier version's adapter list.
	for _, name := range optionalVolumes {
		if hasVolumeNamed(lt.Spec.Volumes, name) && !hasVolumeNamed(wt.Spec.Volumes, name) {
			return true
		}
	}
	return false
}

// optionalVolumes are the volumes (and their mounts) the operator removes when not wanted.
var optionalVolumes = [...]string{CacheVolume, AdaptersVolume}

func hasVolumeNamed(vs []corev1.Volume, name string) bool {
	return slices.ContainsFunc(vs, func(v corev1.Volume) bool { return v.Name == name })
}

// setDeployment writes the owned fields of want onto out, a copy of the live object.
func setDeployment(out, want *appsv1.Deployment, sc Scale) {
	n, _ := wantedReplicas(out, sc)
	out.Spec.Replicas = ptr.To(n)
	out.Labels = mergeLabels(out.Labels, want.Labels)
	prevEnv := out.Annotations[EnvAnnotation]
	out.Annotations = setOwnedAnnotations(out.Annotations, want.Annotations)
	setTemplate(&out.Spec.Template, &want.Spec.Template, prevEnv)
}

// setOwnedAnnotations writes the operator's annotations, removing EnvAnnotation when want
// has none.
func setOwnedAnnotations(have, want map[string]string) map[string]string {
	have = mergeLabels(have, want)
	for _, k := range []string{EnvAnnotation, RaisedAnnotation} {
		if _, ok := want[k]; !ok {
			delete(have, k)
		}
	}
	return have
}

// setTemplate writes templateDrifted's fields of want onto t; prevEnv is the live object's
// EnvAnnotation before the update.
func setTemplate(t, want *corev1.PodTemplateSpec, prevEnv string) {
	t.Labels = mergeLabels(t.Labels, want.Labels)
	t.Spec.PriorityClassName = want.Spec.PriorityClassName
	t.Spec.EnableServiceLinks = want.Spec.EnableServiceLinks
	// The adapters gate is the operator's; others' readiness gates stay.
	t.Spec.ReadinessGates = slices.DeleteFunc(t.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == kinds.AdaptersGate })
	if kinds.HasAdaptersGate(&want.Spec) {
		t.Spec.ReadinessGates = append(t.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: kinds.AdaptersGate})
	}
	if len(t.Spec.ReadinessGates) == 0 {
		t.Spec.ReadinessGates = nil
	}
	wc := want.Spec.Containers[0]
	if i := slices.IndexFunc(t.Spec.Containers, func(c corev1.Container) bool { return c.Name == kinds.ContainerName }); i < 0 {
		t.Spec.Containers = append(t.Spec.Containers, wc)
	} else {
		c := &t.Spec.Containers[i]
		c.Image, c.Command, c.Args, c.Ports = wc.Image, wc.Command, wc.Args, wc.Ports
		c.Env = setEnv(c.Env, wc.Env, prevEnv)
		c.StartupProbe, c.ReadinessProbe, c.LivenessProbe = wc.StartupProbe, wc.ReadinessProbe, wc.LivenessProbe
		c.Resources.Limits, c.Resources.Requests = wc.Resources.Limits, wc.Resources.Requests
		for _, m := range wc.VolumeMounts {
			if !hasMount(c.VolumeMounts, m) {
				c.VolumeMounts = append(slices.DeleteFunc(c.VolumeMounts, func(x corev1.VolumeMount) bool { return x.Name == m.Name }), m)
			}
		}
	}
	for _, v := range want.Spec.Volumes {
		if !hasVolume(t.Spec.Volumes, v) {
			t.Spec.Volumes = append(slices.DeleteFunc(t.Spec.Volumes, func(x corev1.Volume) bool { return x.Name == v.Name }), v)
		}
	}
	for _, name := range optionalVolumes {
		if hasVolumeNamed(want.Spec.Volumes, name) {
			continue
		}
		t.Spec.Volumes = slices.DeleteFunc(t.Spec.Volumes, func(x corev1.Volume) bool { return x.Name == name })
		for i := range t.Spec.Containers {
			if c := &t.Spec.Containers[i]; c.Name == kinds.ContainerName {
				c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(x corev1.VolumeMount) bool { return x.Name == name })
			}
		}
	}
}

func isHTTPPort(p corev1.ServicePort) bool { return p.Name == PortName }

func serviceDrifted(live, want *corev1.Service) bool {
	if !hasLabels(live.Labels, want.Labels) || !maps.Equal(live.Spec.Selector, want.Spec.Selector) {
		return true
	}
	i := slices.IndexFunc(live.Spec.Ports, isHTTPPort)
	if i < 0 {
		return true
	}
	h, w := live.Spec.Ports[i], want.Spec.Ports[0]
	return h.Port != w.Port || h.TargetPort != w.TargetPort || h.Protocol != w.Protocol
}

func setService(out, want *corev1.Service) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Spec.Selector = maps.Clone(want.Spec.Selector)
	w := want.Spec.Ports[0]
	if i := slices.IndexFunc(out.Spec.Ports, isHTTPPort); i < 0 {
		out.Spec.Ports = append(out.Spec.Ports, w)
	} else {
		p := &out.Spec.Ports[i]
		p.Port, p.TargetPort, p.Protocol = w.Port, w.TargetPort, w.Protocol
	}
}

func hpaDrifted(live, want *autoscalingv2.HorizontalPodAutoscaler) bool {
	return !hasLabels(live.Labels, want.Labels) ||
		live.Spec.ScaleTargetRef != want.Spec.ScaleTargetRef ||
		ptr.Deref(live.Spec.MinReplicas, 1) != ptr.Deref(want.Spec.MinReplicas, 1) ||
		live.Spec.MaxReplicas != want.Spec.MaxReplicas ||
		metricsDrifted(live.Spec.Metrics, want.Spec.Metrics) ||
		!ptr.Equal(scaleDownWindowOf(live), scaleDownWindowOf(want))
}

// scaleDownWindowOf is the HPA's scale-down stabilization window, the one part of behavior the
// operator owns; nil leaves it to the HPA controller. The rest of behavior (scale-up, the
// policies the API server fills in) is compared by nobody, so defaults never read as drift.
func scaleDownWindowOf(h *autoscalingv2.HorizontalPodAutoscaler) *int32 {
	if b := h.Spec.Behavior; b != nil && b.ScaleDown != nil {
		return b.ScaleDown.StabilizationWindowSeconds
	}
	return nil
}

// metricsDrifted compares the Pods metrics the operator sets field by field (the reflective
// Semantic.DeepEqual costs a dozen allocations per resync); other shapes fall back to it.
func metricsDrifted(have, want []autoscalingv2.MetricSpec) bool {
	if len(have) != len(want) {
		return true
	}
	for i := range want {
		h, w := &have[i], &want[i]
		if w.Type != autoscalingv2.PodsMetricSourceType || w.Pods == nil {
			if !equality.Semantic.DeepEqual(*h, *w) {
				return true
			}
			continue
		}
		if h.Type != w.Type || h.Pods == nil || h.Pods.Metric.Name != w.Pods.Metric.Name || h.Pods.Metric.Selector != nil ||
			h.Pods.Target.Type != w.Pods.Target.Type || h.Pods.Target.AverageValue == nil ||
			h.Pods.Target.AverageValue.Cmp(*w.Pods.Target.AverageValue) != 0 ||
			h.Resource != nil || h.Object != nil || h.External != nil || h.ContainerResource != nil {
			return true
		}
	}
	return false
}

func setHPA(out, want *autoscalingv2.HorizontalPodAutoscaler) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Spec.ScaleTargetRef = want.Spec.ScaleTargetRef
	out.Spec.MinReplicas = ptr.To(*want.Spec.MinReplicas)
	out.Spec.MaxReplicas = want.Spec.MaxReplicas
	out.Spec.Metrics = want.Spec.Metrics
	setScaleDownWindow(out, scaleDownWindowOf(want))
}

// setScaleDownWindow writes the window into out's behavior, keeping the rest of it; a nil
// window is removed (an HPA without behavior keeps none).
func setScaleDownWindow(out *autoscalingv2.HorizontalPodAutoscaler, window *int32) {
	b := out.Spec.Behavior
	switch {
	case window == nil && (b == nil || b.ScaleDown == nil):
		return
	case window == nil:
		b.ScaleDown.StabilizationWindowSeconds = nil
		return
	case b == nil:
		b = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
		out.Spec.Behavior = b
	}
	if b.ScaleDown == nil {
		b.ScaleDown = &autoscalingv2.HPAScalingRules{}
	}
	b.ScaleDown.StabilizationWindowSeconds = ptr.To(*window)
}

func configMapDrifted(live, want *corev1.ConfigMap) bool {
	return !hasLabels(live.Labels, want.Labels) || !maps.Equal(live.Data, want.Data)
}

func setConfigMap(out, want *corev1.ConfigMap) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Data = maps.Clone(want.Data)
}

func pdbDrifted(live, want *policyv1.PodDisruptionBudget) bool {
	return !hasLabels(live.Labels, want.Labels) || live.Spec.MinAvailable != nil ||
		!equality.Semantic.DeepEqual(live.Spec.Selector, want.Spec.Selector) ||
		live.Spec.MaxUnavailable == nil || *live.Spec.MaxUnavailable != *want.Spec.MaxUnavailable
}

func setPDB(out, want *policyv1.PodDisruptionBudget) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Spec.Selector = want.Spec.Selector.DeepCopy()
	out.Spec.MinAvailable = nil
	out.Spec.MaxUnavailable = ptr.To(*want.Spec.MaxUnavailable)
}

// OwnedPatch is the two-way strategic merge patch from base to obj. base's resourceVersion is
// left out of the comparison, so the patch always carries obj's as a precondition.
func OwnedPatch(base, obj Child) ([]byte, error) {
	b := base.DeepCopyObject().(Child)
	b.SetResourceVersion("")
	from, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(from, to, obj)
}

// SameController reports whether live has the same controller as the object we built.
func SameController(live, ours metav1.Object) bool {
	a, b := metav1.GetControllerOfNoCopy(live), metav1.GetControllerOfNoCopy(ours)
	return a != nil && b != nil && a.UID == b.UID
}

// Remerge re-applies the owned fields of the action's object (an updated copy) onto a freshly
// read live object, after a conflict.
func Remerge(live Child, a Action) (Child, bool) {
	desired := a.Object
	switch l := live.(type) {
	case *appsv1.Deployment:
		d := desired.(*appsv1.Deployment)
		if !deploymentDrifted(l, d, a.Scale) {
			return nil, false
		}
		setDeployment(l, d, a.Scale)
		return l, true
	case *corev1.ConfigMap:
		d := desired.(*corev1.ConfigMap)
		if !configMapDrifted(l, d) {
			return nil, false
		}
		setConfigMap(l, d)
		return l, true
	case *policyv1.PodDisruptionBudget:
		d := desired.(*policyv1.PodDisruptionBudget)
		if !pdbDrifted(l, d) {
			return nil, false
		}
		setPDB(l, d)
		return l, true
	case *unstructured.Unstructured:
		d := desired.(*unstructured.Unstructured)
		if d.GetKind() == KindLeaderWorkerSet {
			if !lwsDrifted(l, d, a.Scale) {
				return nil, false
			}
			setLWS(l, d, a.Scale)
			return l, true
		}
		if !unstructuredDrifted(l, d) {
			return nil, false
		}
		setUnstructured(l, d)
		return l, true
	case *corev1.Service:
		d := desired.(*corev1.Service)
		if !serviceDrifted(l, d) {
			return nil, false
		}
		setService(l, d)
		return l, true
	case *autoscalingv2.HorizontalPodAutoscaler:
		d := desired.(*autoscalingv2.HorizontalPodAutoscaler)
		if !hpaDrifted(l, d) {
			return nil, false
		}
		setHPA(l, d)
		return l, true
	}
	return nil, false
}
