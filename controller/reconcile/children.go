package reconcile

import (
	"encoding/json"
	"maps"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// Names and values the operator puts on its children.
const (
	// ReplicasAnnotation records the spec.replicas last applied to the Deployment, so the
	// operator sets the count only when the user changes it and otherwise leaves it to the HPA.
	ReplicasAnnotation = "ai.example.com/replicas"
	// PortName and Port are vLLM's OpenAI-compatible HTTP endpoint.
	PortName = "http"
	Port     = 8000
	// QueueLabel hands the pods to a Kueue LocalQueue.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// QueueMetric is vLLM's queue length, the HPA's signal.
	QueueMetric = "num_requests_waiting"
	// TargetQueueLength is the average queue length per pod the HPA aims for by default.
	TargetQueueLength = 5
	// AdaptersVolume is the ConfigMap volume listing the LoRA adapters, mounted at AdaptersPath
	// as AdaptersFile; kubelet refreshes it in place, so adapter changes need no rollout.
	AdaptersVolume = "adapters"
	AdaptersPath   = "/etc/vllm/adapters"
	AdaptersFile   = "adapters.json"
	// EnableLoRAArg turns on vLLM's LoRA support when the model has adapters.
	EnableLoRAArg = "--enable-lora"
)

// AdaptersConfigMapName is the ConfigMap holding an InferenceService's adapter list.
func AdaptersConfigMapName(isvc string) string { return isvc + "-adapters" }

// Scale is how many pods a model runs: Replicas at first and, when Fixed, whenever the user
// changes it; otherwise whatever the HPA picks between Min and Max.
type Scale struct {
	Replicas, Min, Max int32
	// Fixed: spec.replicas is the user's count (v1alpha1, or v1beta1 replicas); false for
	// v1beta1 autoscaling, where a change of the bounds must not reset the HPA's choice.
	Fixed bool
}

// scaleOf reads the scale from v1beta1's autoscaling bounds, else derives it from replicas as
// the seed does.
func scaleOf(isvc *crd.InferenceService, ext *crd.SpecExtensions) Scale {
	if a := ext.Autoscaling; a != nil {
		return Scale{Replicas: isvc.Spec.Replicas, Min: a.MinReplicas, Max: a.MaxReplicas}
	}
	lo, hi := hpaBounds(isvc.Spec.Replicas)
	return Scale{Replicas: isvc.Spec.Replicas, Min: lo, Max: hi, Fixed: true}
}

// childLabels are set on every child and on the pod template.
func childLabels(name string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "vllm",
		"app.kubernetes.io/instance": name,
		ManagedByLabel:               ManagedByValue,
		InstanceLabel:                name,
	}
}

func selectorLabels(name string) map[string]string {
	return map[string]string{InstanceLabel: name}
}

// selectorString is selectorLabels(name) as a label selector: names are DNS labels, so
// nothing needs escaping.
func selectorString(name string) string { return InstanceLabel + "=" + name }

// apiVersion is the owners' apiVersion, formatted once.
var apiVersion = crd.GroupVersion.String()

// ownerRef makes the isvc the controller of a child, so deletion cascades and events map back.
func ownerRef(isvc *crd.InferenceService) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: apiVersion, Kind: crd.Kind, Name: isvc.Name, UID: isvc.UID,
		Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

// shared is what every child of one isvc carries. DesiredChildren builds it once and the
// children share its maps and slices: desired objects are only read (updates copy from them).
type shared struct {
	meta     metav1.ObjectMeta
	selector map[string]string
}

func sharedOf(isvc *crd.InferenceService) shared {
	return shared{
		meta: metav1.ObjectMeta{
			Name: isvc.Name, Namespace: isvc.Namespace, Labels: childLabels(isvc.Name),
			OwnerReferences: []metav1.OwnerReference{ownerRef(isvc)},
		},
		selector: selectorLabels(isvc.Name),
	}
}

// childMeta is fresh shared metadata, for a caller that changes its maps.
func childMeta(isvc *crd.InferenceService) metav1.ObjectMeta { return sharedOf(isvc).meta }

// hpaBounds are the seed's autoscaling bounds: min max(1, r/2), max 3r.
func hpaBounds(replicas int32) (minReplicas, maxReplicas int32) {
	return max(1, replicas/2), replicas * 3
}

func desiredDeployment(isvc *crd.InferenceService, ext *crd.SpecExtensions, b shared) *appsv1.Deployment {
	meta := b.meta
	if q := isvc.Spec.QueueName; q != "" {
		meta.Labels = maps.Clone(meta.Labels)
		meta.Labels[QueueLabel] = q
	}
	podLabels := meta.Labels // the queue label goes on the pods too: Kueue admits pods
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(isvc.Spec.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: b.selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					PriorityClassName: isvc.Spec.PriorityClassName,
					Containers:        []corev1.Container{desiredContainer(&isvc.Spec)},
					Volumes:           []corev1.Volume{{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: shmSource}}},
				},
			},
		},
	}
	d.Annotations = map[string]string{ReplicasAnnotation: strconv.Itoa(int(isvc.Spec.Replicas))}
	if len(ext.Adapters) > 0 {
		ps := &d.Spec.Template.Spec
		c := &ps.Containers[0]
		c.Args = append(c.Args, EnableLoRAArg)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: AdaptersVolume, MountPath: AdaptersPath, ReadOnly: true})
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: AdaptersVolume, VolumeSource: corev1.VolumeSource{
			// DefaultMode as the API server defaults it, so the comparison sees no drift.
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: AdaptersConfigMapName(isvc.Name)}, DefaultMode: ptr.To[int32](0o644)},
		}})
	}
	return d
}

// adapterEntry is one line of AdaptersFile, in the shape of vLLM's --lora-modules JSON form.
type adapterEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// desiredConfigMap lists the adapters for the model server; nil when there are none.
func desiredConfigMap(isvc *crd.InferenceService, ext *crd.SpecExtensions, b shared) *corev1.ConfigMap {
	if len(ext.Adapters) == 0 {
		return nil
	}
	entries := make([]adapterEntry, len(ext.Adapters))
	for i, a := range ext.Adapters {
		entries[i] = adapterEntry{Name: a.Name, Path: a.StorageURI}
	}
	data, _ := json.Marshal(entries) // strings only: cannot fail
	meta := b.meta
	meta.Name = AdaptersConfigMapName(isvc.Name)
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Data:       map[string]string{AdaptersFile: string(data)},
	}
}

// adaptersIn reads the adapter names back from a ConfigMap the operator wrote.
func adaptersIn(cm *corev1.ConfigMap) []string {
	var entries []adapterEntry
	if cm == nil || json.Unmarshal([]byte(cm.Data[AdaptersFile]), &entries) != nil {
		return nil
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return names
}

// desiredPDB keeps voluntary disruptions (drains, upgrades) to one pod at a time, only when
// the model keeps at least two pods: with one, a budget would block every drain or protect
// nothing.
func desiredPDB(isvc *crd.InferenceService, sc Scale, b shared) *policyv1.PodDisruptionBudget {
	if sc.Min < 2 || isvc.Spec.Replicas == 0 {
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: b.meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: b.selector},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}
}

// What is the same in every model's Deployment, built once and shared by every desired
// object: desired objects are only read, and TestSharedPartsUnchanged checks that nothing
// writes through them.
var (
	health = &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString(PortName)}
	// Weights can take many minutes to load: the startup probe allows an hour before
	// liveness applies, so a slow load is not mistaken for a hang.
	startupProbe   = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: 10, FailureThreshold: 360}
	readinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: 5, FailureThreshold: 3}
	livenessProbe  = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: 20, FailureThreshold: 3}
	vllmPorts      = []corev1.ContainerPort{{Name: PortName, ContainerPort: Port, Protocol: corev1.ProtocolTCP}}
	// vLLM shares tensors through /dev/shm; the runtime's 64Mi default is too small.
	shmSource = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
)

// portArg is Port as vLLM's --port value.
var portArg = strconv.Itoa(Port)

func desiredContainer(spec *crd.InferenceServiceSpec) corev1.Container {
	return corev1.Container{
		Name:           ContainerName,
		Image:          spec.ImageOrDefault(),
		Args:           []string{"--model", spec.Model, "--port", portArg},
		Ports:          vllmPorts,
		StartupProbe:   startupProbe,
		ReadinessProbe: readinessProbe,
		LivenessProbe:  livenessProbe,
		VolumeMounts:   []corev1.VolumeMount{{Name: "shm", MountPath: "/dev/shm"}},
		Resources:      desiredResources(spec),
	}
}

// desiredResources sets requests so a namespace with a quota admits the pods, GPUs in both
// requests and limits (extended resources require it), and mirrors the API server's defaulting
// (a limit without a request becomes the request) so the comparison never sees a false drift.
func desiredResources(spec *crd.InferenceServiceSpec) corev1.ResourceRequirements {
	if spec.Resources == nil || (len(spec.Resources.Requests) == 0 && len(spec.Resources.Limits) == 0) {
		return sharedResources.get(spec)
	}
	return buildResources(spec)
}

// resourcesKey is all a model's resources depend on when the user sets no requests or limits.
type resourcesKey struct {
	gpu  corev1.ResourceName
	gpus int32
}

// resourceCache holds the requests and limits of models that set none, by GPU resource and
// count: shared, read-only like the rest of the desired children, instead of two maps built
// per reconcile. Bounded: past maxSharedResources keys, each reconcile builds its own.
type resourceCache struct {
	mu sync.RWMutex
	m  map[resourcesKey]corev1.ResourceRequirements
}

const maxSharedResources = 64

var sharedResources = &resourceCache{m: map[resourcesKey]corev1.ResourceRequirements{}}

func (c *resourceCache) get(spec *crd.InferenceServiceSpec) corev1.ResourceRequirements {
	k := resourcesKey{spec.GPUResourceName(), spec.GPUs()}
	c.mu.RLock()
	r, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return r
	}
	r = buildResources(spec)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) < maxSharedResources {
		c.m[k] = r
	}
	return r
}

func buildResources(spec *crd.InferenceServiceSpec) corev1.ResourceRequirements {
	req, lim := crd.DefaultRequests(), make(corev1.ResourceList, 1)
	var user crd.Resources
	if spec.Resources != nil {
		user = *spec.Resources
	}
	for k, v := range user.Requests {
		req[k] = v.DeepCopy()
	}
	for k, l := range user.Limits {
		lim[k] = l.DeepCopy()
		// A missing request becomes the limit, as the API server would default it; a default
		// request above a user's limit is lowered to it (a user's own request above its limit
		// is refused by the CRD's CEL rule).
		_, userSet := user.Requests[k]
		if r, ok := req[k]; !ok || (!userSet && r.Cmp(l) > 0) {
			req[k] = l.DeepCopy()
		}
	}
	if g := spec.GPUs(); g > 0 {
		name := spec.GPUResourceName()
		req[name] = *resource.NewQuantity(int64(g), resource.DecimalSI)
		lim[name] = *resource.NewQuantity(int64(g), resource.DecimalSI)
	}
	if len(lim) == 0 {
		lim = nil
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

func desiredService(b shared) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: b.meta,
		Spec: corev1.ServiceSpec{
			Selector: b.selector,
			Ports: []corev1.ServicePort{{
				Name: PortName, Port: Port, TargetPort: intstr.FromString(PortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// desiredHPA returns nil when the model is scaled to zero: an HPA cannot hold 0 replicas.
func desiredHPA(isvc *crd.InferenceService, ext *crd.SpecExtensions, sc Scale, b shared) *autoscalingv2.HorizontalPodAutoscaler {
	if ext.Autoscaling == nil && isvc.Spec.Replicas == 0 {
		return nil
	}
	lo, hi := sc.Min, sc.Max
	queue := int64(TargetQueueLength)
	if a := ext.Autoscaling; a != nil && a.TargetQueueLength != nil {
		queue = int64(*a.TargetQueueLength)
	}
	// A fresh Quantity per object: Quantity caches its string form, so sharing one races.
	target := *resource.NewQuantity(queue, resource.DecimalSI)
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: b.meta,
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: isvc.Name},
			MinReplicas:    ptr.To(lo),
			MaxReplicas:    hi,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: QueueMetric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
				},
			}},
		},
	}
}
