package kinds

import (
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the caches keep of each child: exactly what package reconcile compares and its diagnosis
// reads (a field dropped here reads there as unset, so the two change together). Each Strip is
// an informer transform; anything else it is handed only loses its managedFields.

// StripService keeps what the controller compares: labels, owner, selector and ports. The
// cluster IPs, IP families and status are the API server's; updates are patches, so what is
// dropped here is never sent back.
func StripService(obj interface{}) (interface{}, error) {
	sv, ok := obj.(*corev1.Service)
	if !ok {
		return stripManagedFields(obj)
	}
	sv.ManagedFields = nil
	sv.Annotations = ownedAnnotations(sv.Annotations)
	sv.Spec = corev1.ServiceSpec{Selector: sv.Spec.Selector, Ports: sv.Spec.Ports}
	sv.Status = corev1.ServiceStatus{}
	return sv, nil
}

// StripHPA keeps of the HPA's status what the AutoscalingActive condition reads: the
// ScalingActive and ScalingLimited conditions' type, status, reason, message and transition
// time (whether a failure dates from before the first pod served), and the current metrics
// (the queue per pod). Other times, replica counts, AbleToScale and the observed generation go; updates go to the main resource, where the server ignores status anyway.
func StripHPA(obj interface{}) (interface{}, error) {
	h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return stripManagedFields(obj)
	}
	h.ManagedFields = nil
	var cs []autoscalingv2.HorizontalPodAutoscalerCondition // a new array: the decoded one is released with the rest
	for _, c := range h.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive || c.Type == autoscalingv2.ScalingLimited {
			if cs == nil {
				cs = make([]autoscalingv2.HorizontalPodAutoscalerCondition, 0, 2)
			}
			cs = append(cs, autoscalingv2.HorizontalPodAutoscalerCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime})
		}
	}
	h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{Conditions: cs, CurrentMetrics: h.Status.CurrentMetrics}
	return h, nil
}

// StripDeployment keeps what the controller compares and the diagnosis reads: labels, the
// operator's annotations, replicas, the pod template's labels, priority class, service links,
// volumes and the model server's container as far as the operator sets it (env included), and
// the status. The rest (other containers, the API server's defaults, the strategy) is never read, and the
// controller updates Deployments with patches of the fields it owns, never by sending the
// cached object back.
func StripDeployment(obj interface{}) (interface{}, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return stripManagedFields(obj)
	}
	d.ManagedFields = nil
	d.Annotations = ownedAnnotations(d.Annotations)
	d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: d.Spec.Template.Labels, Annotations: placedAnnotations(d.Annotations[PlacementAnnotation], d.Spec.Template.Annotations)},
		Spec:       stripPodSpec(&d.Spec.Template.Spec),
	}}
	return d, nil
}

// PlacementAnnotation lists the placement fields and keys the operator set on a pod template
// (reconcile/placement.go); its template annotations' keys are its PlacementAnnotationKey tokens.
const (
	PlacementAnnotation    = OwnedAnnotationPrefix + "placement"
	PlacementAnnotationKey = "annotation/"
)

// placedAnnotations keeps of a template's annotations the ones the record says the operator
// set: the only ones it compares, and others' (a rollout restart's) need no memory.
func placedAnnotations(record string, a map[string]string) map[string]string {
	var out map[string]string
	for _, tok := range strings.Split(record, ",") {
		if k, ok := strings.CutPrefix(tok, PlacementAnnotationKey); ok {
			if v, ok := a[k]; ok {
				if out == nil {
					out = map[string]string{}
				}
				out[k] = v
			}
		}
	}
	return out
}

func ownedAnnotations(a map[string]string) map[string]string {
	var out map[string]string
	for k, v := range a {
		if strings.HasPrefix(k, OwnedAnnotationPrefix) {
			if out == nil {
				out = make(map[string]string, 1)
			}
			out[k] = v
		}
	}
	return out
}

func stripPodSpec(ps *corev1.PodSpec) corev1.PodSpec {
	out := corev1.PodSpec{PriorityClassName: ps.PriorityClassName, EnableServiceLinks: ps.EnableServiceLinks, Volumes: ps.Volumes, ReadinessGates: ps.ReadinessGates,
		ServiceAccountName: ps.ServiceAccountName, DeprecatedServiceAccount: ps.DeprecatedServiceAccount,
		// spec.nodeSelector, tolerations ...: compared when the spec sets them (reconcile/placement.go)
		NodeSelector: ps.NodeSelector, Tolerations: ps.Tolerations, Affinity: ps.Affinity, TopologySpreadConstraints: ps.TopologySpreadConstraints,
		ImagePullSecrets: ps.ImagePullSecrets, RuntimeClassName: ps.RuntimeClassName}
	for i := range ps.Containers {
		if c := &ps.Containers[i]; c.Name == ContainerName || c.Name == PickerContainerName {
			out.Containers = []corev1.Container{{
				Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, Env: c.Env, Ports: c.Ports, VolumeMounts: c.VolumeMounts,
				Resources:    corev1.ResourceRequirements{Limits: c.Resources.Limits, Requests: c.Resources.Requests},
				StartupProbe: c.StartupProbe, ReadinessProbe: c.ReadinessProbe, LivenessProbe: c.LivenessProbe,
				Lifecycle: preStopOnly(c.Lifecycle),
			}}
		}
	}
	return out
}

// preStopOnly keeps of a container's lifecycle the preStop hook, the part the operator sets
// (reconcile/template.go) and compares.
func preStopOnly(l *corev1.Lifecycle) *corev1.Lifecycle {
	if l == nil || l.PreStop == nil {
		return nil
	}
	return &corev1.Lifecycle{PreStop: l.PreStop}
}

// StripReplicaSet keeps what the diagnosis reads of a ReplicaSet (identity, owner, revision,
// status): its spec is a copy of the Deployment's, pod template and all.
func StripReplicaSet(obj interface{}) (interface{}, error) {
	if rs, ok := obj.(*appsv1.ReplicaSet); ok {
		rs.ManagedFields = nil
		rs.Spec = appsv1.ReplicaSetSpec{}
		rev, hasRev := rs.Annotations[RevisionAnnotation]
		onlyInstance(&rs.ObjectMeta)
		if hasRev {
			rs.Annotations = map[string]string{RevisionAnnotation: rev}
		}
		return rs, nil
	}
	return stripManagedFields(obj)
}

// onlyInstance keeps, of a ReplicaSet's or Pod's labels and annotations, the one label that is
// read (InstanceLabel, for the index and to map events): the rest are copies of the
// template's, and there are as many of these objects as of all the others together.
func onlyInstance(m *metav1.ObjectMeta) {
	m.Annotations = nil
	if v, ok := m.Labels[InstanceLabel]; ok {
		m.Labels = map[string]string{InstanceLabel: v}
	} else {
		m.Labels = nil
	}
}

// StripPod keeps what the diagnosis, the GPU metrics and the LoRA adapter step read of a Pod:
// metadata, the node it is bound to, its phase, its IP (a ready pod's model server is asked at
// it), its scheduled and ready conditions, its scheduling gates, an evicted pod's QoS class and
// its containers' states. Containers, volumes and
// env are the Deployment's and dominate a pod's size; images, other addresses and resources in
// the status are never read. A container's readiness probe is kept while it is started and not ready: the
// diagnosis then reads its failure window.
func StripPod(obj interface{}) (interface{}, error) {
	return StripPodSeen(obj, nil, time.Time{})
}

// StripPodSeen is StripPod, and stamps StartedSinceAnnotation at now on a container that prev
// (the cached version) showed not started yet, carrying an earlier stamp over while the
// container stays started and not ready. A container first seen already started gets no stamp:
// the diagnosis then counts from the container's start.
func StripPodSeen(obj interface{}, prev *corev1.Pod, now time.Time) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return stripManagedFields(obj)
	}
	p.ManagedFields = nil
	group := lwsLabels(p.Labels)
	onlyInstance(&p.ObjectMeta)
	if group != nil {
		if p.Labels == nil {
			p.Labels = make(map[string]string, len(group))
		}
		maps.Copy(p.Labels, group)
	}
	// Scheduling gates say a pod is queued for admission, readiness gates that the adapters gate
	// is the operator's to open (usually none: nil costs nothing).
	spec := corev1.PodSpec{NodeName: p.Spec.NodeName, SchedulingGates: p.Spec.SchedulingGates, ReadinessGates: p.Spec.ReadinessGates}
	if p.Spec.NodeName == "" {
		// Until it is scheduled, what keeps it off nodes: the diagnosis names the taint it does
		// not tolerate and the label its selector wants (reconcile/diagnose_placement.go).
		spec.Tolerations, spec.NodeSelector = p.Spec.Tolerations, p.Spec.NodeSelector
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
			spec.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity}
		}
	}
	st := &p.Status
	qos := corev1.PodQOSClass("")
	if st.Reason == "Evicted" {
		qos = st.QOSClass // what the eviction message advises on; kept only where it is read
	}
	*st = corev1.PodStatus{
		Phase: st.Phase, Reason: st.Reason, Message: st.Message, PodIP: st.PodIP, Conditions: readConditions(st.Conditions, HasAdaptersGate(&p.Spec)),
		ContainerStatuses: st.ContainerStatuses, QOSClass: qos,
	}
	if prev != nil && prev.UID != p.UID {
		prev = nil
	}
	for i := range st.ContainerStatuses {
		c := &st.ContainerStatuses[i]
		*c = corev1.ContainerStatus{Name: c.Name, Ready: c.Ready, Started: c.Started, RestartCount: c.RestartCount,
			State: c.State, LastTerminationState: c.LastTerminationState}
		if c.State.Running == nil || c.Ready || c.Started == nil || !*c.Started {
			continue
		}
		for j := range p.Spec.Containers {
			if sc := &p.Spec.Containers[j]; sc.Name == c.Name && sc.ReadinessProbe != nil {
				spec.Containers = append(spec.Containers, corev1.Container{Name: sc.Name, ReadinessProbe: sc.ReadinessProbe})
			}
		}
		if since := startedSince(prev, c, now); since != "" {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[StartedSinceAnnotation+c.Name] = since
		}
	}
	p.Spec = spec
	return p, nil
}

// startedSince is the stamp of c, started and not ready, given the cached version prev.
func startedSince(prev *corev1.Pod, c *corev1.ContainerStatus, now time.Time) string {
	if prev == nil || now.IsZero() {
		return ""
	}
	for i := range prev.Status.ContainerStatuses {
		o := &prev.Status.ContainerStatuses[i]
		if o.Name != c.Name || o.RestartCount != c.RestartCount ||
			o.State.Running != nil && !o.State.Running.StartedAt.Equal(&c.State.Running.StartedAt) {
			continue // another instance of the container
		}
		if o.Started == nil || !*o.Started {
			return now.UTC().Format(time.RFC3339Nano)
		}
		return prev.Annotations[StartedSinceAnnotation+c.Name]
	}
	return ""
}

// readConditions keeps the pod conditions the controller reads: PodScheduled (why a pod is
// unschedulable), Ready, and for a pod with the adapters gate ContainersReady (its server
// answers) and the gate's own.
func readConditions(cs []corev1.PodCondition, gated bool) []corev1.PodCondition {
	var out []corev1.PodCondition // a new array: the decoded one is released with the rest
	for _, c := range cs {
		if c.Type == corev1.PodScheduled || c.Type == corev1.PodReady ||
			gated && (c.Type == corev1.ContainersReady || c.Type == AdaptersGate) {
			if out == nil {
				out = make([]corev1.PodCondition, 0, 2)
			}
			out = append(out, c)
		}
	}
	return out
}

// lwsLabels are the LeaderWorkerSet labels of a pod, which the cache keeps: a multi-node
// model's groups are read from them. nil for a Deployment's pod.
func lwsLabels(l map[string]string) map[string]string {
	name, ok := l[LWSNameLabel]
	if !ok {
		return nil
	}
	return map[string]string{LWSNameLabel: name, LWSGroupLabel: l[LWSGroupLabel], LWSWorkerLabel: l[LWSWorkerLabel]}
}

// HasAdaptersGate reports whether a pod spec declares the adapters gate.
func HasAdaptersGate(ps *corev1.PodSpec) bool {
	return slices.ContainsFunc(ps.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == AdaptersGate })
}

// stripManagedFields drops managedFields, which the operator never reads.
func stripManagedFields(obj interface{}) (interface{}, error) {
	if acc, err := meta.Accessor(obj); err == nil && acc.GetManagedFields() != nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}
