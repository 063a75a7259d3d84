package reconcile

import (
	"maps"
	"slices"
	"strconv"
	"strings"
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
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// Names and values the operator puts on its children.
const (
	// ReplicasAnnotation records the spec.replicas last applied to the Deployment, so the
	// operator sets the count only when the user changes it and otherwise leaves it to the HPA.
	ReplicasAnnotation = "ai.example.com/replicas"
	// EnvAnnotation lists the names of the model server's environment variables the operator
	// set, so it owns those by name (reverting hand edits, removing the ones a spec drops)
	// and leaves variables others add (admission webhooks, a platform's defaults) alone:
	// owning the whole list would fight a webhook that injects one on every update.
	EnvAnnotation = "ai.example.com/env"
	// PortName and Port are vLLM's OpenAI-compatible HTTP endpoint.
	PortName = "http"
	Port     = 8000
	// QueueLabel hands the pods to a Kueue LocalQueue.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// QueueMetric is vLLM's queue length, the HPA's signal.
	QueueMetric = "num_requests_waiting"
	// TargetQueueLength is the average queue length per pod the HPA aims for by default.
	TargetQueueLength = 5
	// AdaptersVolume is the ConfigMap volume an earlier version mounted at AdaptersPath; vLLM
	// never read it. It is removed from a Deployment that still has it.
	AdaptersVolume = "adapters"
	AdaptersPath   = "/etc/vllm/adapters"
	// EnableLoRAArg turns on vLLM's LoRA support when the model has adapters.
	EnableLoRAArg = "--enable-lora"
	// RuntimeLoRAEnv lets the operator load and unload adapters through the server's
	// /v1/load_lora_adapter and /v1/unload_lora_adapter, so adapter changes roll no pod.
	RuntimeLoRAEnv = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
	// CacheVolume is spec.cache's PersistentVolumeClaim, mounted at crd.CachePath.
	CacheVolume = "model-cache"
	// HFHomeEnv points Hugging Face downloads at the cache.
	HFHomeEnv = "HF_HOME"
	// ShmVolume is /dev/shm.
	ShmVolume = "shm"
)

// AdaptersConfigMapName is the ConfigMap an earlier version kept the adapter list in; the
// operator deletes its own (Reconcile) since adapters are loaded at run time.
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
		kinds.ManagedByLabel:         kinds.ManagedByValue,
		kinds.InstanceLabel:          name,
	}
}

func selectorLabels(name string) map[string]string {
	return map[string]string{kinds.InstanceLabel: name}
}

// selectorString is selectorLabels(name) as a label selector: names are DNS labels, so
// nothing needs escaping.
func selectorString(name string) string { return kinds.InstanceLabel + "=" + name }

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

// scaleTarget is what the autoscaler scales: the Deployment, or the LeaderWorkerSet's scale
// subresource (its replicas are groups; its selector the leaders, which serve the queue metric).
func scaleTarget(isvc *crd.InferenceService, ext *crd.SpecExtensions) autoscalingv2.CrossVersionObjectReference {
	if isMultiNode(ext) {
		return autoscalingv2.CrossVersionObjectReference{APIVersion: lwsAPIVersion, Kind: KindLeaderWorkerSet, Name: isvc.Name}
	}
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: isvc.Name}
}

func desiredDeployment(isvc *crd.InferenceService, ext *crd.SpecExtensions, b shared) *appsv1.Deployment {
	meta := b.meta
	if q := isvc.Spec.QueueName; q != "" {
		meta.Labels = maps.Clone(meta.Labels)
		meta.Labels[QueueLabel] = q
	}
	podLabels := meta.Labels // the queue label goes on the pods too: Kueue admits pods
	volumes := []corev1.Volume{{Name: ShmVolume, VolumeSource: corev1.VolumeSource{EmptyDir: shmSource}}}
	if c := ext.Cache; c != nil {
		volumes = append(volumes, corev1.Volume{Name: CacheVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.ClaimName},
		}})
	} else {
		// The container's own filesystem does not outlive a restart: without a claim the
		// weights go on an emptyDir, which does, so a restarted container loads, not downloads.
		volumes = append(volumes, corev1.Volume{Name: CacheVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
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
					// A Service named vllm in the namespace would inject VLLM_PORT=tcp://...,
					// which vLLM reads as its own port setting and aborts on.
					EnableServiceLinks: ptr.To(false),
					Containers:         []corev1.Container{desiredContainer(podSpecOf(isvc, ext), ext)},
					Volumes:            volumes,
				},
			},
		},
	}
	if len(ext.Adapters) > 0 {
		d.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: kinds.AdaptersGate}}
	}
	d.Annotations = map[string]string{ReplicasAnnotation: strconv.Itoa(int(isvc.Spec.Replicas))}
	if env := d.Spec.Template.Spec.Containers[0].Env; len(env) > 0 {
		d.Annotations[EnvAnnotation] = envNames(env)
	}
	return d
}

// envNames is the EnvAnnotation value for env.
func envNames(env []corev1.EnvVar) string {
	names := make([]string, len(env))
	for i, e := range env {
		names[i] = e.Name
	}
	return strings.Join(names, ",")
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
	// /health is answered on vLLM's event loop, behind the requests it is serving: under load
	// it answers in seconds. Readiness takes a slow answer as a busy pod for a few seconds
	// (traffic moves to other pods); liveness is far looser, restarting only a server that
	// has not answered for minutes, so a busy healthy server is never killed.
	readinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 3}
	livenessProbe  = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: 30, TimeoutSeconds: 30, FailureThreshold: 10}
	vllmPorts      = []corev1.ContainerPort{{Name: PortName, ContainerPort: Port, Protocol: corev1.ProtocolTCP}}
	// vLLM shares tensors through /dev/shm (the runtime's 64Mi default is too small); bounded,
	// since a Memory emptyDir is charged to the pod and, unbounded, could take the node's memory.
	shmSource = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(crd.ShmSizeGi<<30, resource.BinarySI)}
	// runtimeLoRA is set when the model has adapters: the operator loads them through the API.
	runtimeLoRA = corev1.EnvVar{Name: RuntimeLoRAEnv, Value: "True"}
	// cacheEnv points Hugging Face at the cache volume when spec.cache is set.
	cacheEnv = corev1.EnvVar{Name: HFHomeEnv, Value: crd.CachePath}
)

// startupPeriod is the startup probe's period; its failure threshold spreads the model's
// startup budget over it.
const startupPeriod = 10

// startupProbe lets the port stay closed while weights download and load, for
// spec.startupTimeoutSeconds (default crd.DefaultStartupTimeoutSeconds): only the user knows
// the model's size and the link's speed. With spec.cache only a first start downloads, but
// that first start needs the budget, so the cache does not shorten it. Liveness applies after.
func startupProbe(ext *crd.SpecExtensions) *corev1.Probe {
	budget := startupBudget(ext)
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: startupPeriod, TimeoutSeconds: 5,
		FailureThreshold: (budget + startupPeriod - 1) / startupPeriod}
}

// serveCommand is the container's command, whatever the image's entrypoint: vllm/vllm-openai
// up to v0.11.0 runs `python3 -m vllm.entrypoints.openai.api_server`, which takes the
// positional model as an ignored model_tag and serves its default model (Qwen/Qwen3-0.6B)
// under the name the operator passes; `vllm serve` reads it as the model on every version.
var serveCommand = []string{"vllm", "serve"}

// startupBudget is how long a pod may take to serve: spec.startupTimeoutSeconds or the default.
func startupBudget(ext *crd.SpecExtensions) int32 {
	if t := ext.StartupTimeoutSeconds; t != nil {
		return *t
	}
	return crd.DefaultStartupTimeoutSeconds
}

// portArg is Port as vLLM's --port value.
var portArg = strconv.Itoa(Port)

// maxCPULoRAsArg keeps every adapter spec.adapters may list loaded in host memory; a constant,
// so a change of the adapters changes no argument and rolls no pod.
var maxCPULoRAsArg = strconv.Itoa(crd.MaxAdapters)

// ModelName is the name clients send for the base model: the operator passes
// --served-model-name spec.model, as vLLM would default it, so the name is the operator's to
// report (status.modelName) and a user's engine argument cannot change it.
func ModelName(spec *crd.InferenceServiceSpec) string { return spec.Model }

// vllmArgs is vllm serve's command line (the image's entrypoint is vllm serve): the model as
// its positional argument (--model is deprecated there), the operator's arguments, then the
// user's engineArgs.
func vllmArgs(spec *crd.InferenceServiceSpec, ext *crd.SpecExtensions) []string {
	args := make([]string, 0, 12+len(ext.EngineArgs))
	args = append(args, spec.Model, "--port", portArg, "--served-model-name", ModelName(spec))
	if p := ext.Parallelism; p != nil {
		// spec.parallelism as given: the pipeline stages are processes of this pod, under vLLM's
		// default executor for a world that fits the pod's GPUs (mp, vllm/config/parallel.py).
		args = append(args, "--tensor-parallel-size", strconv.Itoa(int(p.TensorParallelSize)),
			"--pipeline-parallel-size", strconv.Itoa(int(p.PipelineParallelSize)))
	} else if g := spec.GPUs(); g > 1 {
		// One replica's GPUs serve one model copy, split tensor-parallel across them.
		args = append(args, "--tensor-parallel-size", strconv.Itoa(int(g)))
	}
	if len(ext.Adapters) > 0 {
		args = append(args, EnableLoRAArg, "--max-cpu-loras", maxCPULoRAsArg)
		if r := maxLoRARank(ext.Adapters); r > 0 {
			args = append(args, "--max-lora-rank", strconv.Itoa(r))
		}
	}
	return append(args, ext.EngineArgs...)
}

// loraRanks are the --max-lora-rank values vLLM v0.11 offers (config/lora.py MaxLoRARanks).
var loraRanks = []int{1, 8, 16, 32, 64, 128, 256, 320, 512}

// defaultLoRARank is vLLM's --max-lora-rank default.
const defaultLoRARank = 16

// maxLoRARank is the smallest rank vLLM offers that holds every adapter's stated rank, or 0
// while vLLM's default does: adapters of rank 16 or less (most) then change no argument, so
// adding one rolls no pod. vLLM refuses to load an adapter of a larger rank than it started
// with, and sizes its LoRA buffers at start.
func maxLoRARank(adapters []crd.Adapter) int {
	top := 0
	for _, a := range adapters {
		if a.Rank != nil {
			top = max(top, int(*a.Rank))
		}
	}
	if top <= defaultLoRARank {
		return 0
	}
	for _, r := range loraRanks {
		if r >= top {
			return r
		}
	}
	return loraRanks[len(loraRanks)-1]
}

// desiredEnv is the operator's variables, then the user's; nil when there are none.
func desiredEnv(ext *crd.SpecExtensions) []corev1.EnvVar {
	var env []corev1.EnvVar
	if len(ext.Adapters) > 0 {
		env = append(env, runtimeLoRA)
	}
	// HF_HOME is the cache's, claim or emptyDir; a user's own HF_HOME (allowed without a
	// claim) points the downloads elsewhere and wins.
	if ext.Cache != nil || !slices.ContainsFunc(ext.Env, func(e corev1.EnvVar) bool { return e.Name == HFHomeEnv }) {
		env = append(env, cacheEnv)
	}
	for _, e := range ext.Env {
		e = *e.DeepCopy()
		if f := e.ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1" // as the API server defaults it, so the comparison sees no drift
		}
		env = append(env, e)
	}
	return env
}

func desiredContainer(spec *crd.InferenceServiceSpec, ext *crd.SpecExtensions) corev1.Container {
	mounts := []corev1.VolumeMount{{Name: ShmVolume, MountPath: "/dev/shm"}, {Name: CacheVolume, MountPath: crd.CachePath}}
	return corev1.Container{
		Name:           kinds.ContainerName,
		Image:          spec.ImageOrDefault(),
		Command:        serveCommand,
		Args:           vllmArgs(spec, ext),
		Env:            desiredEnv(ext),
		Ports:          vllmPorts,
		StartupProbe:   startupProbe(ext),
		ReadinessProbe: readinessProbe,
		LivenessProbe:  livenessProbe,
		VolumeMounts:   mounts,
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
	req, lim := crd.DefaultRequests(spec.GPUs()), make(corev1.ResourceList, 1)
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

// leaderSelector is a multi-node model's Service selector: only a group's leader serves the API.
func leaderSelector(name string) map[string]string {
	return map[string]string{kinds.InstanceLabel: name, kinds.LWSWorkerLabel: "0"}
}

func desiredService(b shared, multiNode bool) *corev1.Service {
	sel := b.selector
	if multiNode {
		sel = leaderSelector(b.meta.Name)
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: b.meta,
		Spec: corev1.ServiceSpec{
			Selector: sel,
			Ports: []corev1.ServicePort{{
				Name: PortName, Port: Port, TargetPort: intstr.FromString(PortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// desiredHPA returns nil when the model is scaled to zero: an HPA cannot hold 0 replicas.
// Its behavior holds only spec.autoscaling.scaleDownDelaySeconds, as the scale-down window;
// unset, behavior stays nil: the HPA controller's default window applies, and HPAs made before
// the field existed are not rewritten. Scale-up keeps the HPA's default (no window): a queue
// above target is requests waiting now.
func desiredHPA(isvc *crd.InferenceService, ext *crd.SpecExtensions, sc Scale, b shared) *autoscalingv2.HorizontalPodAutoscaler {
	if ext.Autoscaling == nil && isvc.Spec.Replicas == 0 {
		return nil
	}
	lo, hi := sc.Min, sc.Max
	queue := int64(TargetQueueLength)
	var behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
	if a := ext.Autoscaling; a != nil {
		if a.TargetQueueLength != nil {
			queue = int64(*a.TargetQueueLength)
		}
		if d := a.ScaleDownDelaySeconds; d != nil {
			behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(*d)}}
		}
	}
	// A fresh Quantity per object: Quantity caches its string form, so sharing one races.
	target := *resource.NewQuantity(queue, resource.DecimalSI)
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: b.meta,
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: scaleTarget(isvc, ext),
			MinReplicas:    ptr.To(lo),
			MaxReplicas:    hi,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: QueueMetric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
				},
			}},
			Behavior: behavior,
		},
	}
}
