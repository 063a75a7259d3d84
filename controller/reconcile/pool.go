// The pool route: where the Gateway API Inference Extension's InferencePool is served, a model
// with spec.gateway gets an InferencePool over its serving pods and an endpoint picker (EPP)
// for it (Deployment, Service, ServiceAccount and a RoleBinding to the picker's ClusterRole),
// and its HTTPRoute sends requests to the pool once the picker serves: the picker chooses a
// pod per request from the pods' own metrics, in their engine's names (queue, KV cache,
// prefix cache, adapters).
// Desired objects, drift and set here; the Routed condition in routed.go.

package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// The pool's kinds and resources: InferencePool v1 (the only version the picker reads), and the
// picker's identity, read as unstructured like the other optional children.
var (
	InferencePoolGVR  = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}
	ServiceAccountGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	RoleBindingGVR    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

// Kinds of the pool route's children, as actions and Events name them. The picker's
// Deployment and Service are named apart from the model's, whose kinds anchor the others.
const (
	KindInferencePool       = "InferencePool"
	KindPicker              = "EndpointPicker"
	KindPickerService       = "EndpointPickerService"
	KindPickerRoleBinding   = "RoleBinding"
	KindPickerServiceAccess = "ServiceAccount"
)

// The picker's ports (cmd/epp v1.5.0's defaults): ext_proc, gRPC health, Prometheus metrics.
const (
	PickerGRPCPort    = 9002
	PickerHealthPort  = 9003
	PickerMetricsPort = 9090
	// PickerHealthService is the gRPC health service the picker answers SERVING on once it
	// has synced its pool.
	PickerHealthService = "inference-extension"
	// DefaultPickerImage is the extension's release of the scoring picker.
	DefaultPickerImage = "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
	// DefaultPickerClusterRole is the install's ClusterRole every picker is bound to in its
	// namespace: read pods and InferencePools (manifests/rbac/endpoint_picker_role.yaml).
	DefaultPickerClusterRole = "inferenceservice-operator-endpoint-picker"
)

// How often a picker reads each of its pods' /metrics (--refresh-metrics-interval), and how
// old a reading may grow before the picker takes it as stale.
//
// v1.5.0 reads every 50 ms: one goroutine per pod with its own ticker (datalayer.Runtime's
// NewEndpoint, datalayer.Collector's loop), each tick a GET of the pod's whole /metrics page,
// parsed and extracted, whether or not a request came. That is 19-34 millicores a picker at
// rest on this project's bench (docs/benchmarks.md), 20-34 cores at 1,000 models, and 20
// page renders a second asked of each model server. The scorers read the last reading
// whatever its age (queue-scorer: num_requests_waiting; kv-cache-utilization-scorer:
// kv_cache_usage_perc; lora-affinity-scorer: lora_requests_info's adapters; the prefix scorer
// its own index of what it routed, and from the readings only the cache's geometry): a longer
// interval only makes their figures older. The queue and KV cache turn over with requests,
// which last hundreds of milliseconds at the least (a prefill of up to 250 ms and a 20 ms
// decode step for a one-token answer on the fake vLLM; seconds for an answer of hundreds of
// tokens): 250 ms keeps a reading within about one short request of the truth, at a fifth of
// the reads. The pickers' routing with it against 50 ms: docs/benchmarks.md.
const (
	DefaultPickerRefreshMetricsInterval = 250 * time.Millisecond
	// MinPickerRefreshMetricsInterval and MaxPickerRefreshMetricsInterval bound the flag: a
	// read takes up to 1s (the collector's timeout) and a picker is one pod's page every tick;
	// past a minute its queue and KV cache figures say nothing of now.
	MinPickerRefreshMetricsInterval = 10 * time.Millisecond
	MaxPickerRefreshMetricsInterval = time.Minute
	// pickerStalenessReads: a reading is stale after four reads missed, v1.5.0's own ratio (its
	// utilization detector's 200 ms threshold over its 50 ms reads).
	pickerStalenessReads = 4
	// pickerPoolMetricsStaleness is v1.5.0's --metrics-staleness-threshold (2s), which only
	// its own pool gauges read (inference_pool_average_kv_cache_utilization and the rest, over
	// the pods with a fresher reading); kept unless four reads are longer.
	pickerPoolMetricsStaleness = 2 * time.Second
)

// CheckPickerRefreshMetricsInterval refuses an interval outside the flag's bounds.
func CheckPickerRefreshMetricsInterval(d time.Duration) error {
	if d < MinPickerRefreshMetricsInterval || d > MaxPickerRefreshMetricsInterval {
		return fmt.Errorf("--endpoint-picker-refresh-metrics-interval=%s: want from %s to %s", d, MinPickerRefreshMetricsInterval, MaxPickerRefreshMetricsInterval)
	}
	return nil
}

// pickerRefresh is f's interval, the default when unset.
func pickerRefresh(f Features) time.Duration {
	if f.PickerRefreshMetricsInterval > 0 {
		return f.PickerRefreshMetricsInterval
	}
	return DefaultPickerRefreshMetricsInterval
}

// vllmPickerConfig is the picker's EndpointPickerConfig for a vLLM model reading its pods every
// refresh: the extension's default profile (queue 2, KV cache 2, prefix cache 3) plus LoRA
// affinity, so a request for an adapter goes to a pod that has it loaded. The prefix scorer
// sizes its index from vLLM's cache_config_info (autoTune). The pods' series are read in the
// picker's built-in vLLM names (its core-metrics-extractor's default engine, v1.5.0's
// pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go: vllm:num_requests_waiting,
// vllm:num_requests_running, vllm:kv_cache_usage_perc, vllm:lora_requests_info,
// vllm:cache_config_info), vllm.Metrics()'s, left implicit.
//
// The utilization detector is the saturation detector every v1.5.0 picker runs (the config
// loader's ensureSaturationDetector adds it when none is named); written here only to give it
// a staleness threshold of four reads: its own 200 ms (four of v1.5.0's 50 ms reads) would
// call a pod read every 250 ms saturated most of the time (utilization.Detector.Saturation
// counts a pod whose reading is older as fully saturated), and the picker would shed every
// sheddable request (an InferenceObjective of negative priority: requestcontrol's
// LegacyAdmissionController) as if the pool were full. Its queue and KV cache thresholds stay
// v1.5.0's (5, 0.8); it is no filter of the profile.
func vllmPickerConfig(refresh time.Duration) string {
	return pickerPlugins(refresh) + pickerProfiles
}

// pickerPlugins is the config's head and plugins; pickerProfiles its saturation detector and
// scheduling profile.
func pickerPlugins(refresh time.Duration) string {
	return `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
  parameters: {autoTune: true, blockSizeTokens: 16, lruCapacityPerServer: 31250}
- type: lora-affinity-scorer
- type: utilization-detector
  parameters: {metricsStalenessThreshold: ` + (pickerStalenessReads * refresh).String() + `}
`
}

const (
	pickerProfiles = `saturationDetector: {pluginRef: utilization-detector}
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: queue-scorer, weight: 2}
  - {pluginRef: kv-cache-utilization-scorer, weight: 2}
  - {pluginRef: prefix-cache-scorer, weight: 3}
  - {pluginRef: lora-affinity-scorer, weight: 1}
`
)

// PickerConfigFor is the picker's EndpointPickerConfig for a model served by e, its pods read
// every refresh: vllmPickerConfig, and for any engine but vLLM the core-metrics-extractor told e's series, as the extension
// documents for SGLang (site-src/implementations/model-servers.md; its metric-name flags,
// --total-queued-requests-metric and the rest, are refused since v1.5.0: "configure metrics
// via engineConfigs"). The pods carry no inference.networking.k8s.io/engine-type label (one
// would change the pod template, and every pod of a pool is one model's, so one engine's):
// e is the extractor's defaultEngine, its engineConfigs entry replacing the built-in one of
// that name whole. An SGLang pod (v0.5) exports no LoRA series (the extension's own entry
// has none either: sglang:lora_pool_* are counts, not the adapters by name the scorer reads) nor sglang:cache_config_info (added after v0.5.3): both are left empty, so
// the picker looks for neither. Without adapter series every pod's LoRA affinity scores 0
// (lora-affinity-scorer: no active or waiting adapter, MaxActiveModels 0), the same for every
// pod: adapter requests are routed on queue, KV cache and prefix alone, and any pod serves
// them (the operator loads every adapter on every pod). Without the cache's geometry the
// prefix scorer keeps blockSizeTokens and its default capacity.
func PickerConfigFor(e engine.Engine, refresh time.Duration) string {
	if e.Name() == engine.VLLM {
		return vllmPickerConfig(refresh)
	}
	m := e.Metrics()
	return pickerPlugins(refresh) + `- type: core-metrics-extractor
  parameters:
    defaultEngine: ` + e.Name() + `
    engineConfigs:
    - name: ` + e.Name() + `
      queuedRequestsSpec: "` + m.Queue + `"
      runningRequestsSpec: "` + m.Running + `"
      kvUsageSpec: "` + m.KVCacheUsage + `"
      loraSpec: ""
      cacheInfoSpec: ""
` + pickerProfiles
}

// PickerName is the name of a model's picker Deployment, Service, ServiceAccount and RoleBinding.
func PickerName(isvc string) string { return isvc + "-epp" }

// poolChildren are the pool route's desired objects; all nil without the pool route.
type poolChildren struct {
	Pool           *unstructured.Unstructured
	Picker         *appsv1.Deployment
	PickerService  *corev1.Service
	ServiceAccount *unstructured.Unstructured
	RoleBinding    *unstructured.Unstructured
	// NoPicker says why a model that asks for the pool route (spec.gateway on a cluster with
	// InferencePools) gets none (pickerWanted); the Routed condition repeats it.
	NoPicker string
}

// pickerWanted decides whether the pool route pays for a model: a picker chooses a pod per
// request from what each server knows (its queue, KV cache, prefix cache and adapters), which
// helps only where there is more than one pod to choose, or adapters to place. A model whose
// scale can never pass one pod (spec.autoscaling.maxReplicas 1, or replicas 0 without
// autoscaling) and that serves no adapters would pay a picker's five objects, its pod (100m
// CPU and 128Mi requested) and an ext_proc hop per request for a choice among one: it keeps the
// Service route, and why is returned for the Routed condition. spec.replicas 1 is not one pod
// forever here: the HPA may scale it to 3 (hpaBounds).
func pickerWanted(sc Scale, ext *crd.SpecExtensions) (bool, string) {
	if len(ext.Adapters) > 0 || sc.Max > 1 {
		return true, ""
	}
	bound := "spec.autoscaling.maxReplicas " + strconv.Itoa(int(sc.Max))
	if ext.Autoscaling == nil {
		bound = "spec.replicas " + strconv.Itoa(int(sc.Replicas)) + " without autoscaling"
	}
	return false, "at most one replica (" + bound + ") and no adapters: the endpoint picker has nothing to choose between, so no InferencePool or picker is made"
}

// pickerLabels are on the picker's objects and pods: not the model's InstanceLabel, so its pods
// are never counted as the model's, and on the pods not ManagedByLabel either, so the
// operator's pod cache never holds them.
func pickerLabels(name string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "endpoint-picker",
		"app.kubernetes.io/instance":  name,
		"app.kubernetes.io/component": "endpoint-picker",
		kinds.ManagedByLabel:          kinds.ManagedByValue,
		kinds.PickerLabel:             name,
	}
}

func pickerMeta(isvc *crd.InferenceService) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: PickerName(isvc.Name), Namespace: isvc.Namespace, Labels: pickerLabels(isvc.Name),
		OwnerReferences: []metav1.OwnerReference{ownerRef(isvc)}}
}

// poolSelector picks the pods that serve the API: a multi-node model's leaders only.
func poolSelector(isvc *crd.InferenceService, ext *crd.SpecExtensions) map[string]string {
	if isMultiNode(ext) {
		return leaderSelector(isvc.Name)
	}
	return selectorLabels(isvc.Name)
}

// desiredPool builds the pool route's children when the route wants them: spec.gateway on a
// cluster whose Features say InferencePools, for a model where a picker has a choice to make
// (pickerWanted).
func desiredPool(isvc *crd.InferenceService, ext *crd.SpecExtensions, f Features) poolChildren {
	if !f.InferencePools || ext.Gateway == nil {
		return poolChildren{}
	}
	if ok, why := pickerWanted(scaleOf(isvc, ext), ext); !ok {
		return poolChildren{NoPicker: why}
	}
	name := PickerName(isvc.Name)
	sel := map[string]interface{}{}
	for k, v := range poolSelector(isvc, ext) {
		sel[k] = v
	}
	pool := newChildUnstructured(isvc, "inference.networking.k8s.io/v1", KindInferencePool)
	pool.Object["spec"] = map[string]interface{}{
		"selector":    map[string]interface{}{"matchLabels": sel},
		"targetPorts": []interface{}{map[string]interface{}{"number": int64(Port)}},
		"appProtocol": "http",
		"endpointPickerRef": map[string]interface{}{
			"group": "", "kind": "Service", "name": name,
			"port": map[string]interface{}{"number": int64(PickerGRPCPort)}, "failureMode": "FailClose",
		},
	}
	meta := pickerMeta(isvc)
	sa := unstructuredWith(meta, "v1", KindPickerServiceAccess)
	role := f.PickerClusterRole
	if role == "" {
		role = DefaultPickerClusterRole
	}
	rb := unstructuredWith(meta, "rbac.authorization.k8s.io/v1", KindPickerRoleBinding)
	rb.Object["roleRef"] = map[string]interface{}{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
	rb.Object["subjects"] = []interface{}{map[string]interface{}{"kind": "ServiceAccount", "name": name, "namespace": isvc.Namespace}}
	return poolChildren{Pool: pool, Picker: desiredPicker(isvc, meta, f), PickerService: desiredPickerService(meta), ServiceAccount: sa, RoleBinding: rb}
}

// PickerArgs are the picker's flags for isvc's engine under f (PickerArgsOn).
func PickerArgs(isvc *crd.InferenceService, f Features) []string {
	return PickerArgsOn(engineOf(isvc), isvc, pickerRefresh(f))
}

// PickerArgsOn are the picker's flags for a model served by e whose pods it reads every
// refresh: its pool, the scoring configuration in e's metric names (PickerConfigFor), the
// interval and the pool gauges' staleness (at least v1.5.0's 2s, at least four reads), and no
// tracing (an OTel console exporter by default), no pprof, and metrics without TokenReview
// (which would need a ClusterRoleBinding per model): the metrics port is for the cluster's
// Prometheus.
func PickerArgsOn(e engine.Engine, isvc *crd.InferenceService, refresh time.Duration) []string {
	return []string{
		"--pool-name=" + isvc.Name, "--pool-namespace=" + isvc.Namespace,
		"--grpc-port=" + strconv.Itoa(PickerGRPCPort), "--grpc-health-port=" + strconv.Itoa(PickerHealthPort),
		"--metrics-port=" + strconv.Itoa(PickerMetricsPort),
		"--config-text=" + PickerConfigFor(e, refresh),
		"--refresh-metrics-interval=" + refresh.String(),
		"--metrics-staleness-threshold=" + max(pickerPoolMetricsStaleness, pickerStalenessReads*refresh).String(),
		"--tracing=false", "--enable-pprof=false", "--metrics-endpoint-auth=false",
	}
}

func desiredPicker(isvc *crd.InferenceService, meta metav1.ObjectMeta, f Features) *appsv1.Deployment {
	image := f.PickerImage
	if image == "" {
		image = DefaultPickerImage
	}
	podLabels := maps.Clone(meta.Labels)
	delete(podLabels, kinds.ManagedByLabel)
	probe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: PickerHealthPort, Service: ptr.To(PickerHealthService)}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1, SuccessThreshold: 1,
		}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{kinds.PickerLabel: isvc.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: meta.Name,
					EnableServiceLinks: ptr.To(false),
					// As the activator's (issue 49): a picker's ext_proc stream lasts as long as its
					// request, so a rollout must not cut the longest stream short. (The picker
					// itself drains its gRPC server within controller-runtime's 30s.)
					TerminationGracePeriodSeconds: ptr.To[int64](600),
					Containers: []corev1.Container{{
						Name: kinds.PickerContainerName, Image: image, Args: PickerArgs(isvc, f),
						Ports: []corev1.ContainerPort{
							{Name: "grpc", ContainerPort: PickerGRPCPort, Protocol: corev1.ProtocolTCP},
							{Name: "grpc-health", ContainerPort: PickerHealthPort, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: PickerMetricsPort, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: probe(2, 3),
						LivenessProbe:  probe(10, 3),
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
						}},
					}},
				},
			},
		},
	}
}

// desiredPickerService: the ports without an appProtocol, as the chart's picker Service
// (config/charts/epplib/templates/_service.yaml, v1.5.0): the picker serves gRPC over TLS, and
// "http2" told a mesh cleartext HTTP/2; how a gateway reaches it is its own policy's to say
// (gatewaypolicy.go).
func desiredPickerService(meta metav1.ObjectMeta) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{kinds.PickerLabel: meta.Labels[kinds.PickerLabel]},
			Ports: []corev1.ServicePort{
				{Name: "grpc-ext-proc", Port: PickerGRPCPort, TargetPort: intstr.FromInt32(PickerGRPCPort), Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: PickerMetricsPort, TargetPort: intstr.FromInt32(PickerMetricsPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// IsPicker reports whether a Deployment or Service is a model's endpoint picker, not the model's own.
func IsPicker(obj metav1.Object) bool { _, ok := obj.GetLabels()[kinds.PickerLabel]; return ok }

// pickerDrifted compares what the operator owns of the picker's Deployment: labels, the
// replica count, the pod labels, the service account and the picker container's image,
// arguments, ports and probes (the cache keeps that container and nothing else of the pod).
func pickerDrifted(live, want *appsv1.Deployment) bool {
	if !hasLabels(live.Labels, want.Labels) || ptr.Deref(live.Spec.Replicas, 1) != ptr.Deref(want.Spec.Replicas, 1) ||
		!hasLabels(live.Spec.Template.Labels, want.Spec.Template.Labels) ||
		live.Spec.Template.Spec.ServiceAccountName != want.Spec.Template.Spec.ServiceAccountName {
		return true
	}
	i := slices.IndexFunc(live.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == kinds.PickerContainerName })
	if i < 0 {
		return true
	}
	l, w := &live.Spec.Template.Spec.Containers[i], &want.Spec.Template.Spec.Containers[0]
	return l.Image != w.Image || !slices.Equal(l.Args, w.Args) || !equality.Semantic.DeepEqual(l.Ports, w.Ports) ||
		!equality.Semantic.DeepEqual(l.ReadinessProbe, w.ReadinessProbe) || !equality.Semantic.DeepEqual(l.LivenessProbe, w.LivenessProbe)
}

func setPicker(out, want *appsv1.Deployment) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Spec.Replicas = want.Spec.Replicas
	out.Spec.Template.Labels = mergeLabels(out.Spec.Template.Labels, want.Spec.Template.Labels)
	out.Spec.Template.Spec.ServiceAccountName = want.Spec.Template.Spec.ServiceAccountName
	w := want.Spec.Template.Spec.Containers[0]
	cs := out.Spec.Template.Spec.Containers
	i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == kinds.PickerContainerName })
	if i < 0 {
		out.Spec.Template.Spec.Containers = append(cs, *w.DeepCopy())
		return
	}
	c := &cs[i]
	c.Image, c.Args, c.Ports = w.Image, slices.Clone(w.Args), slices.Clone(w.Ports)
	c.ReadinessProbe, c.LivenessProbe = w.ReadinessProbe.DeepCopy(), w.LivenessProbe.DeepCopy()
}

// pickerServiceDrifted compares labels, the selector and the two ports by name.
func pickerServiceDrifted(live, want *corev1.Service) bool {
	if !hasLabels(live.Labels, want.Labels) || !maps.Equal(live.Spec.Selector, want.Spec.Selector) {
		return true
	}
	for _, w := range want.Spec.Ports {
		i := slices.IndexFunc(live.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == w.Name })
		if i < 0 {
			return true
		}
		h := live.Spec.Ports[i]
		if h.Port != w.Port || h.TargetPort != w.TargetPort || h.Protocol != w.Protocol || ptr.Deref(h.AppProtocol, "") != ptr.Deref(w.AppProtocol, "") {
			return true
		}
	}
	return false
}

func setPickerService(out, want *corev1.Service) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Spec.Selector = maps.Clone(want.Spec.Selector)
	for _, w := range want.Spec.Ports {
		if i := slices.IndexFunc(out.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == w.Name }); i < 0 {
			out.Spec.Ports = append(out.Spec.Ports, w)
		} else {
			out.Spec.Ports[i] = w
		}
	}
}

// identityDrifted compares what the operator owns of the picker's ServiceAccount (labels) and
// RoleBinding (labels, the role and the subjects: a binding's roleRef cannot change, so a
// changed one is deleted and made anew, see decidePool).
func identityDrifted(live, want *unstructured.Unstructured) bool {
	return !hasLabels(live.GetLabels(), want.GetLabels()) ||
		!equality.Semantic.DeepEqual(live.Object["subjects"], want.Object["subjects"])
}

func roleRefChanged(live, want *unstructured.Unstructured) bool {
	return !equality.Semantic.DeepEqual(live.Object["roleRef"], want.Object["roleRef"])
}

func setIdentity(out, want *unstructured.Unstructured) {
	out.SetLabels(mergeLabels(out.GetLabels(), want.GetLabels()))
	if s, ok := want.Object["subjects"]; ok {
		out.Object["subjects"] = runtimeDeepCopy(s)
	}
}

// poolDrifted compares the InferencePool's labels and spec as unstructuredDrifted does, but
// spec.appProtocol only where the served schema keeps it. The extension's CRD has the field
// from v1.4.0, defaulted to "http", so every pool read through such a CRD carries it; a live
// pool without it was pruned by an older CRD (v1.0 to v1.3), where writing it again would be
// pruned again, a write on every pass. (The picker and gateways of those releases speak
// HTTP/1.1 to the pods, which is what "http" says.)
func poolDrifted(live, want *unstructured.Unstructured) bool {
	if _, kept, _ := unstructured.NestedFieldNoCopy(live.Object, "spec", "appProtocol"); !kept {
		want = want.DeepCopy()
		unstructured.RemoveNestedField(want.Object, "spec", "appProtocol")
	}
	return unstructuredDrifted(live, want)
}
