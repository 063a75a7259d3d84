// The model server's pod template, shared by the Deployment and the LeaderWorkerSet's
// leader and workers: the vLLM container (command line, probes, mounts), the template's
// volumes, and its drift and set.

package reconcile

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// What is the same in every model's Deployment, built once and shared by every desired
// object: desired objects are only read, and TestSharedPartsUnchanged checks that nothing
// writes through them.
var (
	// The default engine's probes, ports and adapters switch (engine.go's serverParts).
	health         = partsOf(engine.VLLM).health
	readinessProbe = partsOf(engine.VLLM).readiness
	livenessProbe  = partsOf(engine.VLLM).liveness
	serverPorts    = partsOf(engine.VLLM).ports
	runtimeLoRA    = *partsOf(engine.VLLM).runtimeAdapters
	// vLLM and SGLang share tensors through /dev/shm (the runtime's 64Mi default is too small); bounded,
	// since a Memory emptyDir is charged to the pod and, unbounded, could take the node's memory.
	shmSource = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(crd.ShmSizeGi<<30, resource.BinarySI)}
	// cacheEnv points Hugging Face at the cache volume when spec.cache is set.
	cacheEnv = corev1.EnvVar{Name: HFHomeEnv, Value: crd.CachePath}
	// offlineEnv keeps a server on a managed cache from downloading: what is missing fails.
	offlineEnv = corev1.EnvVar{Name: HFOfflineEnv, Value: "1"}
	// modulesEnv is where transformers writes a remote-code model's modules (HF_MODULES_CACHE,
	// $HF_HOME/modules by default), on the ModulesVolume beside a managed, read-only cache.
	modulesEnv = corev1.EnvVar{Name: "HF_MODULES_CACHE", Value: ModulesPath}
	// drain keeps a deleted pod serving before SIGTERM (vLLM and SGLang stop their HTTP server
	// at once on it, cutting requests in flight) while its endpoint is withdrawn from gateways
	// and kube-proxy; see PreStopSleepSeconds.
	drain = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: PreStopSleepSeconds}}}
)

// PreStopSleepSeconds is the model server's preStop sleep: 5 s covers the EndpointSlice
// controller's update and its watchers' (gateways, kube-proxy) apply on a loaded cluster; it
// counts against the pod's terminationGracePeriodSeconds, the API server's default 30 (the
// template sets none), which leaves the server 25 s after SIGTERM.
const PreStopSleepSeconds = 5

// ModulesPath is where ModulesVolume is mounted: outside the read-only cache's mount.
const ModulesPath = "/var/cache/hf-modules"

// startupPeriod is the startup probe's period; its failure threshold spreads the model's
// startup budget over it.
const startupPeriod = 10

// startupProbe lets the port stay closed while weights download and load, for
// spec.startupTimeoutSeconds (default crd.DefaultStartupTimeoutSeconds): only the user knows
// the model's size and the link's speed. With spec.cache only a first start downloads, but
// that first start needs the budget, so the cache does not shorten it. Liveness applies after.
func startupProbe(ext *crd.SpecExtensions, health *corev1.HTTPGetAction) *corev1.Probe {
	budget := startupBudget(ext)
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: health}, PeriodSeconds: startupPeriod, TimeoutSeconds: 5,
		FailureThreshold: (budget + startupPeriod - 1) / startupPeriod}
}

// startupBudget is how long a pod may take to serve: spec.startupTimeoutSeconds or the default.
func startupBudget(ext *crd.SpecExtensions) int32 {
	if t := ext.StartupTimeoutSeconds; t != nil {
		return *t
	}
	return crd.DefaultStartupTimeoutSeconds
}

// maxCPULoRAs keeps every adapter spec.adapters may list loaded in host memory; a constant,
// so a change of the adapters changes no argument and rolls no pod.
const maxCPULoRAs = crd.MaxAdapters

// maxLoRAsArg lets four adapters share a batch: vLLM's default, 1, runs requests for a second
// adapter only after the first one's drain, so a model serving several adapters serves one
// at a time (the scheduler's max_loras check). Each slot is GPU memory (a rank-max_lora_rank
// pair of matrices per layer), so it stays a small constant, the same for every model so
// adding an adapter rolls no pod; spec.engineArgs' --max-loras overrides it (the last wins).
const maxLoRAs = 4

// ModelName is the name clients send for the base model: the operator passes
// --served-model-name spec.model, as vLLM would default it, so the name is the operator's to
// report (status.modelName) and a user's engine argument cannot change it.
func ModelName(spec *crd.InferenceServiceSpec) string { return spec.Model }

// ModelArg is what vLLM loads: the Hub id, or the directory the weights are in on the cache
// (an s3:// source's copy, a pvc:// source's path), which vLLM v0.11 takes as a local model
// when it is a directory (its config.json read from there, no Hub look-up).
func ModelArg(spec *crd.InferenceServiceSpec, ext *crd.SpecExtensions) string {
	if dir := weightsDir(ext.Cache); dir != "" {
		return dir
	}
	return spec.Model
}

// serveArgs is the server's command line (the engine's ServeArgs): the model, the operator's
// choices, then the user's engineArgs.
func serveArgs(spec *crd.InferenceServiceSpec, ext *crd.SpecExtensions) []string {
	sv := engine.Serve{Model: ModelArg(spec, ext), ServedName: ModelName(spec), Extra: ext.EngineArgs}
	if p := ext.Parallelism; p != nil {
		// spec.parallelism as given: the pipeline stages are processes of this pod, under the
		// engine's default executor for a world that fits the pod's GPUs.
		sv.TensorParallel, sv.PipelineParallel = int(p.TensorParallelSize), int(p.PipelineParallelSize)
	} else if g := spec.GPUs(); g > 1 {
		// One replica's GPUs serve one model copy, split tensor-parallel across them.
		sv.TensorParallel = int(g)
	}
	if len(ext.Adapters) > 0 {
		sv.Adapters, sv.MaxLoRAs, sv.MaxCPULoRAs, sv.MaxLoRARank = true, maxLoRAs, maxCPULoRAs, maxLoRARank(ext.Adapters)
	}
	return engineNamed(ext.EngineName()).ServeArgs(sv)
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

func desiredContainer(spec *crd.InferenceServiceSpec, ext *crd.SpecExtensions) corev1.Container {
	mounts := []corev1.VolumeMount{{Name: ShmVolume, MountPath: "/dev/shm"}, {Name: CacheVolume, MountPath: crd.CachePath}}
	if ext.Cache.Managed() {
		mounts = append(mounts, corev1.VolumeMount{Name: ModulesVolume, MountPath: ModulesPath})
	}
	p := partsOf(ext.EngineName())
	return corev1.Container{
		// The container keeps vLLM's name whatever the engine: the operator, its metrics and
		// its diagnosis find the model server by it.
		Name:           kinds.ContainerName,
		Image:          spec.ImageFor(ext.EngineName()),
		Command:        p.server.Command,
		Args:           serveArgs(spec, ext),
		Env:            desiredEnv(ext),
		Ports:          p.ports,
		StartupProbe:   startupProbe(ext, p.health),
		ReadinessProbe: p.readiness,
		LivenessProbe:  p.liveness,
		Lifecycle:      drain,
		VolumeMounts:   mounts,
		Resources:      desiredResources(spec),
	}
}

// prior is what the operator recorded on the live object of what it set last: the
// environment's names (EnvAnnotation) and the placement's fields and keys (PlacementAnnotation).
type prior struct{ env, placement string }

func priorOf(annotations map[string]string) prior {
	return prior{env: annotations[EnvAnnotation], placement: annotations[PlacementAnnotation]}
}

// templateDrifted compares the owned fields of a pod template: its labels, priority class,
// service links, the model server container, the operator's volumes and the placement fields
// the spec sets. prev is the live object's record of what the operator set.
func templateDrifted(lt, wt *corev1.PodTemplateSpec, prev prior) bool {
	prevEnv := prev.env
	if placementDrifted(lt, wt, prev.placement) || !hasLabels(lt.Labels, wt.Labels) || lt.Spec.PriorityClassName != wt.Spec.PriorityClassName ||
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
var optionalVolumes = [...]string{CacheVolume, AdaptersVolume, ModulesVolume}

func hasVolumeNamed(vs []corev1.Volume, name string) bool {
	return slices.ContainsFunc(vs, func(v corev1.Volume) bool { return v.Name == name })
}

// setTemplate writes templateDrifted's fields of want onto t, and the token opt-out with a
// change that rolls the pods anyway; prev is the live object's record before the update.
func setTemplate(t, want *corev1.PodTemplateSpec, prev prior) {
	prevEnv := prev.env
	// The opt-out is not compared by templateDrifted, and written only with a rollout: alone it
	// would roll every model's GPUs on an operator upgrade (or on a mere scale change) to drop a
	// token; a model created or rolled since carries none.
	if templateDrifted(t, want, prev) {
		t.Spec.AutomountServiceAccountToken = want.Spec.AutomountServiceAccountToken
	}
	setPlacement(t, want, prev.placement)
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
		setPreStop(c, preStopOf(&wc))
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
	// The API server defaults nothing in a sleep hook, so the stored one compares as built.
	if !equality.Semantic.DeepEqual(preStopOf(have), preStopOf(want)) {
		return true
	}
	for _, m := range want.VolumeMounts {
		if !hasMount(have.VolumeMounts, m) {
			return true
		}
	}
	return false
}

// preStopOf is the container's preStop hook, the one lifecycle field the operator owns.
func preStopOf(c *corev1.Container) *corev1.LifecycleHandler {
	if c.Lifecycle == nil {
		return nil
	}
	return c.Lifecycle.PreStop
}

// setPreStop sets the container's preStop hook, keeping the rest of its lifecycle (a postStart
// hook, a stop signal) on a copy: the hook may be a shared desired part.
func setPreStop(c *corev1.Container, h *corev1.LifecycleHandler) {
	var l corev1.Lifecycle
	if c.Lifecycle != nil {
		l = *c.Lifecycle
	}
	l.PreStop = h
	if l == (corev1.Lifecycle{}) {
		c.Lifecycle = nil
		return
	}
	c.Lifecycle = &l
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
