package reconcile

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine/vllm"
	"github.com/example/inferenceservice-operator/controller/rollout"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// world is a tiny fake API server and deployment controller for table tests of the pure
// reconcile; the real proof is the e2e suite against a real API server. obs holds the live
// objects whole; Reconcile sees them as the informers cache them, and updates are applied as
// the patches the controller sends.
type world struct {
	isvc *crd.InferenceService
	ext  crd.SpecExtensions
	f    Features
	obs  Observed
	rv   int
	// servers are the ready pods' model servers, by pod, once podsReady ran with adapters in
	// the spec (the I/O layer observes only then); loadFails makes a load of a name fail.
	servers   map[string][]LoadedAdapter
	failed    map[string]map[string]string
	loadFails map[string]string
	// later moves the clock past the resourceVersion's seconds.
	later time.Duration
	// window is a canary step's metrics, as the I/O layer reads them (canary_test.go).
	window *rollout.Window
}

// cached is what the informers hold of the live objects: copies through their transforms.
func (w *world) cached() Observed {
	o := w.obs
	if o.Deployment != nil {
		d, _ := kinds.StripDeployment(o.Deployment.DeepCopy())
		o.Deployment = d.(*appsv1.Deployment)
	}
	if o.Service != nil {
		sv, _ := kinds.StripService(o.Service.DeepCopy())
		o.Service = sv.(*corev1.Service)
	}
	if o.Picker != nil {
		d, _ := kinds.StripDeployment(o.Picker.DeepCopy())
		o.Picker = d.(*appsv1.Deployment)
	}
	if o.PickerService != nil {
		sv, _ := kinds.StripService(o.PickerService.DeepCopy())
		o.PickerService = sv.(*corev1.Service)
	}
	if o.HPA != nil {
		h, _ := kinds.StripHPA(o.HPA.DeepCopy())
		o.HPA = h.(*autoscalingv2.HorizontalPodAutoscaler)
	}
	return o
}

// patched applies an update action the way the controller sends it: as a patch from the
// cached base onto the live object, so fields the cache dropped must survive.
func patched(live Child, a Action) Child {
	data, err := OwnedPatch(a.Cached, a.Object)
	if err != nil {
		panic(fmt.Sprintf("patch %s: %v", a.Kind, err))
	}
	from, err := json.Marshal(live)
	if err != nil {
		panic(err)
	}
	to, err := strategicpatch.StrategicMergePatch(from, data, live)
	if err != nil {
		panic(fmt.Sprintf("apply patch %s to %s: %v", data, a.Kind, err))
	}
	out := reflect.New(reflect.TypeOf(live).Elem()).Interface().(Child) // a fresh one: unmarshal merges maps
	if err := json.Unmarshal(to, out); err != nil {
		panic(err)
	}
	return out
}

// live is the stored object an action is about.
func (w *world) live(obj Child) Child {
	switch obj.(type) {
	case *appsv1.Deployment:
		if IsPicker(obj) {
			return w.obs.Picker
		}
		if IsCanary(obj) {
			return w.obs.CanaryDeployment
		}
		return w.obs.Deployment
	case *corev1.Service:
		if IsPicker(obj) {
			return w.obs.PickerService
		}
		if IsCanary(obj) {
			return w.obs.CanaryService
		}
		return w.obs.Service
	case *autoscalingv2.HorizontalPodAutoscaler:
		return w.obs.HPA
	case *corev1.ConfigMap:
		return w.obs.ConfigMap
	case *policyv1.PodDisruptionBudget:
		return w.obs.PDB
	}
	panic(fmt.Sprintf("no patches for %T", obj))
}

func newWorld(replicas int32) *world {
	i := &crd.InferenceService{Spec: crd.InferenceServiceSpec{Model: "Qwen/Qwen3-0.6B", Replicas: replicas, GPUsPerReplica: ptr.To[int32](1)}}
	i.Name, i.Namespace, i.UID, i.Generation = "qwen3", "default", types.UID("isvc-uid"), 1
	return &world{isvc: i}
}

func (w *world) now() metav1.Time {
	return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, w.rv, 0, time.UTC).Add(w.later))
}

func (w *world) reconcile() Output {
	out := Reconcile(Input{ISVC: w.isvc, Ext: w.ext, Features: w.f, Observed: w.cached(), Now: w.now(), Adapters: w.answers(), RolloutWindow: w.window})
	w.isvc.Status = out.Status
	w.obs.StoredRollout = out.StatusExt.Rollout
	return out
}

// answers is what each ready pod's server lists, as the I/O layer hands it to Reconcile: nil
// when nothing is observed.
func (w *world) answers() []PodAdapters {
	if w.servers == nil {
		return nil
	}
	var out []PodAdapters
	for _, pod := range slices.Sorted(maps.Keys(w.servers)) {
		out = append(out, PodAdapters{Pod: pod, IP: "10.1.0." + pod[len(pod)-1:], Loaded: slices.Clone(w.servers[pod]), Failed: maps.Clone(w.failed[pod])})
	}
	return out
}

// applySteps plays the model servers' runtime LoRA API, as strict as vLLM: a load of a name
// already loaded, or an unload of one that is not, is refused.
func (w *world) applySteps(t testing.TB, steps []AdapterStep) {
	for _, s := range steps {
		loaded := w.servers[s.Pod]
		i := slices.IndexFunc(loaded, func(l LoadedAdapter) bool { return l.Name == s.Name })
		switch {
		case !s.Load && i < 0:
			t.Fatalf("unload of %s on %s, which does not list it", s.Name, s.Pod)
		case !s.Load:
			w.servers[s.Pod] = slices.Delete(loaded, i, i+1)
		case i >= 0:
			t.Fatalf("load of %s on %s, which already lists it", s.Name, s.Pod)
		case w.loadFails[s.Name] != "":
			if w.failed[s.Pod] == nil {
				w.failed[s.Pod] = map[string]string{}
			}
			w.failed[s.Pod][s.Name] = w.loadFails[s.Name]
		default:
			w.servers[s.Pod] = append(loaded, LoadedAdapter{Name: s.Name, Path: s.Path})
			delete(w.failed[s.Pod], s.Name)
		}
	}
}

// apply plays the API server: store, bump resourceVersion and generation, fill defaults.
func (w *world) apply(actions []Action) {
	for _, a := range actions {
		if a.Verb == Update && a.Cached != nil {
			a.Object = patched(w.live(a.Object), a)
		}
		// The API server stores what it decoded, never the sender's object.
		a.Object = a.Object.DeepCopyObject().(Child)
		w.rv++
		a.Object.SetResourceVersion(fmt.Sprint(w.rv))
		switch o := a.Object.(type) {
		case *appsv1.Deployment:
			if IsPicker(o) {
				if w.obs.Picker = o; a.Verb == Delete {
					w.obs.Picker = nil
				} else {
					o.Generation++
				}
				continue
			}
			if IsCanary(o) {
				if w.obs.CanaryDeployment = o; a.Verb == Delete {
					w.obs.CanaryDeployment = nil
				} else {
					o.Generation++
					serverDefaults(o)
				}
				continue
			}
			if a.Verb == Delete {
				w.obs.Deployment = nil
				continue
			}
			o.Generation++
			serverDefaults(o)
			w.obs.Deployment = o
		case *corev1.Service:
			if IsPicker(o) {
				if w.obs.PickerService = o; a.Verb == Delete {
					w.obs.PickerService = nil
				}
				continue
			}
			if IsCanary(o) {
				if w.obs.CanaryService = o; a.Verb == Delete {
					w.obs.CanaryService = nil
				}
				continue
			}
			if a.Verb == Delete {
				w.obs.Service = nil
				continue
			}
			o.Spec.ClusterIP, o.Spec.Type, o.Spec.SessionAffinity = "10.0.0.1", corev1.ServiceTypeClusterIP, corev1.ServiceAffinityNone
			w.obs.Service = o
		case *autoscalingv2.HorizontalPodAutoscaler:
			if a.Verb == Delete {
				w.obs.HPA = nil
				continue
			}
			hpaServerDefaults(o)
			w.obs.HPA = o
		case *corev1.ConfigMap:
			if a.Verb == Delete {
				w.obs.ConfigMap = nil
				continue
			}
			w.obs.ConfigMap = o
		case *policyv1.PodDisruptionBudget:
			if a.Verb == Delete {
				w.obs.PDB = nil
				continue
			}
			w.obs.PDB = o
		case *unstructured.Unstructured:
			slot := &w.obs.ServiceMonitor
			switch o.GetKind() {
			case KindHTTPRoute:
				slot = &w.obs.HTTPRoute
				o.SetGeneration(o.GetGeneration() + 1) // every write here changes its spec
			case KindLeaderWorkerSet:
				slot = &w.obs.LeaderWorkerSet
				o.SetGeneration(o.GetGeneration() + 1)
			case KindInferencePool:
				slot = &w.obs.InferencePool
			case KindScaledObject:
				slot = &w.obs.ScaledObject
			case KindPickerServiceAccess:
				slot = &w.obs.PickerServiceAccount
			case KindPickerRoleBinding:
				slot = &w.obs.PickerRoleBinding
			case KindNetworkPolicy:
				if slot = &w.obs.NetworkPolicy; a.Kind == KindPickerNetworkPolicy {
					slot = &w.obs.PickerNetworkPolicy
				}
			case KindDestinationRule:
				slot = &w.obs.DestinationRule
			case KindHealthCheckPolicy:
				slot = &w.obs.HealthCheckPolicy
			}
			if a.Verb == Delete {
				*slot = nil
				continue
			}
			*slot = o
		}
	}
}

func serverDefaults(d *appsv1.Deployment) {
	d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	d.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		c.ImagePullPolicy, c.TerminationMessagePath = corev1.PullIfNotPresent, "/dev/termination-log"
		for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if p != nil {
				if p.TimeoutSeconds == 0 {
					p.TimeoutSeconds = 1
				}
				p.SuccessThreshold, p.HTTPGet.Scheme = 1, corev1.URISchemeHTTP
			}
		}
	}
}

// podsReady plays the deployment controller and kubelet: every desired pod updated and ready.
func (w *world) podsReady() {
	d := w.obs.Deployment.DeepCopy()
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	w.obs.Deployment = d
	if len(w.ext.Adapters) == 0 && w.servers == nil {
		return
	}
	if w.servers == nil {
		w.servers, w.failed = map[string][]LoadedAdapter{}, map[string]map[string]string{}
	}
	for i := range int(n) {
		if pod := fmt.Sprintf("qwen3-%d", i); w.servers[pod] == nil {
			w.servers[pod] = []LoadedAdapter{} // a new pod starts without adapters
		}
	}
	for pod := range w.servers {
		var i int
		if _, err := fmt.Sscanf(pod, "qwen3-%d", &i); err == nil && i >= int(n) {
			delete(w.servers, pod)
			delete(w.failed, pod)
		}
	}
}

func verbs(actions []Action) string {
	var s []string
	for _, a := range actions {
		s = append(s, string(a.Verb)+" "+a.Kind)
	}
	return strings.Join(s, ", ")
}

// TestSeedRun reproduces the source document's run step for step.
func TestSeedRun(t *testing.T) {
	w := newWorld(3)

	out := w.reconcile()
	if got := verbs(out.Actions); got != "create Deployment, create Service, create HorizontalPodAutoscaler" {
		t.Fatalf("first reconcile: %s", got)
	}
	if out.Status.ReadyReplicas != 0 || out.Status.Phase != crd.PhaseProgressing {
		t.Fatalf("first status %+v", out.Status)
	}
	w.apply(out.Actions)
	w.podsReady()

	out = w.reconcile()
	if len(out.Actions) != 0 || out.Status.ReadyReplicas != 3 || out.Status.Phase != crd.PhaseReady {
		t.Fatalf("converged: actions %q status %+v", verbs(out.Actions), out.Status)
	}
	if !meta.IsStatusConditionTrue(out.Status.Conditions, crd.ConditionReady) {
		t.Fatal("Ready condition not True")
	}

	w.isvc.Spec.Replicas, w.isvc.Generation = 6, 2
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, update HorizontalPodAutoscaler, create PodDisruptionBudget" {
		t.Fatalf("after 3->6 (HPA minimum 3, so a budget too): %s", got)
	}
	d := out.Actions[0].Object.(*appsv1.Deployment)
	h := out.Actions[1].Object.(*autoscalingv2.HorizontalPodAutoscaler)
	// The HPA's minimum is held at the raise (raisehold.go) until the new pods have served.
	if *d.Spec.Replicas != 6 || *h.Spec.MinReplicas != 6 || h.Spec.MaxReplicas != 18 || h.Spec.Metrics[0].Pods.Metric.Name != "num_requests_waiting" {
		t.Fatalf("deploy replicas %d, hpa %d..%d", *d.Spec.Replicas, *h.Spec.MinReplicas, h.Spec.MaxReplicas)
	}
	if d.ResourceVersion == "" {
		t.Fatal("an update must carry the resourceVersion read, for optimistic locking")
	}
	w.apply(out.Actions)
	w.podsReady()
	out = w.reconcile()
	if len(out.Actions) != 0 || out.Status.ReadyReplicas != 6 || out.Status.Phase != crd.PhaseReady {
		t.Fatalf("after 3->6 converged: %q %+v", verbs(out.Actions), out.Status)
	}

	w.obs.Service = nil
	out = w.reconcile()
	if got := verbs(out.Actions); got != "create Service" {
		t.Fatalf("self-heal: %s", got)
	}
}

func converged(t *testing.T, replicas int32) *world {
	t.Helper()
	w := newWorld(replicas)
	w.apply(w.reconcile().Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged: %s", verbs(out.Actions))
	}
	return w
}

func TestDoesNotFightTheHPA(t *testing.T) {
	w := converged(t, 4) // HPA bounds 2..12
	for _, n := range []int32{2, 9, 12} {
		d := w.obs.Deployment.DeepCopy()
		d.Spec.Replicas = ptr.To(n)
		w.obs.Deployment = d
		if out := w.reconcile(); len(out.Actions) != 0 {
			t.Fatalf("HPA chose %d: operator wants %s", n, verbs(out.Actions))
		}
	}
	d := w.obs.Deployment.DeepCopy()
	d.Spec.Replicas = ptr.To[int32](100) // outside the HPA's bounds: someone tampered
	w.obs.Deployment = d
	out := w.reconcile()
	if len(out.Actions) != 1 || *out.Actions[0].Object.(*appsv1.Deployment).Spec.Replicas != 4 {
		t.Fatalf("tampered replicas not restored: %s", verbs(out.Actions))
	}
}

func TestRestoresTamperedOwnedFieldsOnly(t *testing.T) {
	cases := map[string]func(w *world){
		"image": func(w *world) {
			d := w.obs.Deployment.DeepCopy()
			d.Spec.Template.Spec.Containers[0].Image = "evil:latest"
			w.obs.Deployment = d
		},
		"gpus": func(w *world) {
			d := w.obs.Deployment.DeepCopy()
			delete(d.Spec.Template.Spec.Containers[0].Resources.Limits, crd.DefaultGPUResource)
			w.obs.Deployment = d
		},
		"service port": func(w *world) {
			s := w.obs.Service.DeepCopy()
			s.Spec.Ports[0].Port = 9000
			w.obs.Service = s
		},
		"service selector": func(w *world) {
			s := w.obs.Service.DeepCopy()
			s.Spec.Selector = map[string]string{"app": "other"}
			w.obs.Service = s
		},
		"hpa max": func(w *world) {
			h := w.obs.HPA.DeepCopy()
			h.Spec.MaxReplicas = 1
			w.obs.HPA = h
		},
		"managed-by label": func(w *world) {
			d := w.obs.Deployment.DeepCopy()
			delete(d.Labels, "app.kubernetes.io/managed-by")
			w.obs.Deployment = d
		},
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			w := converged(t, 2)
			tamper(w)
			out := w.reconcile()
			if len(out.Actions) != 1 || out.Actions[0].Verb != Update {
				t.Fatalf("want one update, got %s", verbs(out.Actions))
			}
			w.apply(out.Actions)
			if out := w.reconcile(); len(out.Actions) != 0 {
				t.Fatalf("not converged after restore: %s", verbs(out.Actions))
			}
		})
	}

	ignored := map[string]func(w *world){
		"sidecar added": func(w *world) {
			d := w.obs.Deployment.DeepCopy()
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "proxy", Image: "envoy"})
			w.obs.Deployment = d
		},
		"extra label and annotation": func(w *world) {
			d := w.obs.Deployment.DeepCopy()
			d.Labels["team"], d.Annotations["note"] = "a", "b"
			w.obs.Deployment = d
		},
		"status written by the deployment controller": func(w *world) {
			d := w.obs.Deployment.DeepCopy()
			d.Status.ReadyReplicas, d.Status.Conditions = 1, []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable}}
			w.obs.Deployment = d
		},
		"hpa status": func(w *world) {
			h := w.obs.HPA.DeepCopy()
			h.Status.CurrentReplicas, h.Status.DesiredReplicas = 3, 3
			w.obs.HPA = h
		},
	}
	for name, change := range ignored {
		t.Run("ignores "+name, func(t *testing.T) {
			w := converged(t, 2)
			change(w)
			if out := w.reconcile(); len(out.Actions) != 0 {
				t.Fatalf("must not act on a field it does not own: %s", verbs(out.Actions))
			}
		})
	}
}

// TestPatchesKeepWhatTheCacheDrops: the caches hold only what the controller reads, so an
// update must leave everything else on the live object (a mesh's sidecar, a volume someone
// added, the API server's cluster IP, a variable a webhook injected) as it is.
func TestPatchesKeepWhatTheCacheDrops(t *testing.T) {
	w := converged(t, 2)
	d := w.obs.Deployment.DeepCopy()
	ps := &d.Spec.Template.Spec
	ps.Containers = append(ps.Containers, corev1.Container{Name: "proxy", Image: "envoy"})
	ps.Containers[0].Env = []corev1.EnvVar{{Name: "HF_HOME", Value: "/cache"}}
	ps.Containers[0].Args = append(ps.Containers[0].Args, "--enforce-eager")
	ps.Containers[0].Image = "evil:latest"
	ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	w.obs.Deployment = d
	sv := w.obs.Service.DeepCopy()
	sv.Spec.Ports[0].Port = 9000
	w.obs.Service = sv

	out := w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, update Service" {
		t.Fatalf("want the two restores, got %s", got)
	}
	w.apply(out.Actions)
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged after restore: %s", verbs(out.Actions))
	}
	ps = &w.obs.Deployment.Spec.Template.Spec
	if ps.Containers[0].Image != crd.DefaultImage {
		t.Fatalf("image not restored: %s", ps.Containers[0].Image)
	}
	if slices.Contains(ps.Containers[0].Args, "--enforce-eager") {
		t.Fatalf("a hand edit of the owned args not reverted: %v", ps.Containers[0].Args)
	}
	if len(ps.Containers[0].Env) != 1 {
		t.Fatalf("a variable someone else set was dropped: %v", ps.Containers[0].Env)
	}
	if len(ps.Containers) != 2 || ps.Containers[1].Name != "proxy" ||
		!hasVolumeNamed(ps.Volumes, "cache") || w.obs.Deployment.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType ||
		ps.Containers[0].TerminationMessagePath == "" {
		t.Fatalf("the restore dropped what others own: %+v, strategy %v", ps, w.obs.Deployment.Spec.Strategy)
	}
	if s := w.obs.Service; s.Spec.Ports[0].Port != Port || s.Spec.ClusterIP != "10.0.0.1" || s.Spec.SessionAffinity != corev1.ServiceAffinityNone {
		t.Fatalf("service after restore: %+v", s.Spec)
	}
}

func TestNeverTouchesChildrenItDoesNotControl(t *testing.T) {
	w := newWorld(2)
	foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "default", UID: "other"}}
	w.obs.Deployment = foreign
	foreignSvc := desiredService(sharedOf(w.isvc), false).DeepCopy()
	foreignSvc.OwnerReferences = nil
	w.obs.Service = foreignSvc
	out := w.reconcile()
	if len(out.Actions) != 0 {
		// An HPA here would scale the foreign Deployment, a PDB or Service select its pods.
		t.Fatalf("acted beside a Deployment it does not control: %s", verbs(out.Actions))
	}
	if len(out.Conflicts) != 1 || out.Status.Phase != crd.PhaseFailed || out.Status.Reason != ReasonChildConflict {
		t.Fatalf("conflicts %v status %+v", out.Conflicts, out.Status)
	}
	c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionReady)
	if !strings.Contains(c.Message, "Deployment default/qwen3 already exists and is not owned") {
		t.Fatalf("message %q", c.Message)
	}
}

// TestNothingActsOnAForeignDeployment: when someone else's Deployment takes the name (ours
// deleted, theirs created), every child of ours that acts on it or its pods goes.
func TestNothingActsOnAForeignDeployment(t *testing.T) {
	w := converged(t, 4) // with a PDB
	w.obs.Deployment = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "default", UID: "other"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](20)}}
	out := w.reconcile()
	if got := verbs(out.Actions); got != "delete Service, delete HorizontalPodAutoscaler, delete PodDisruptionBudget" {
		t.Fatalf("beside a foreign Deployment: %s", got)
	}
	if out.Status.Reason != ReasonChildConflict {
		t.Fatalf("status %+v", out.Status)
	}
}

// TestDependentsWaitForTheDeployment: a Deployment not in the cache may be someone else's
// namesake outside the label-scoped cache; what acts on it is applied only after its create.
func TestDependentsWaitForTheDeployment(t *testing.T) {
	w := newWorld(4)
	w.f = Features{ServiceMonitors: true}
	out := w.reconcile()
	var waiting []string
	for _, a := range out.Actions {
		if a.AfterDeployment {
			waiting = append(waiting, a.Kind)
		}
	}
	if got := strings.Join(waiting, ","); got != "Service,HorizontalPodAutoscaler,PodDisruptionBudget,ServiceMonitor" {
		t.Fatalf("waiting for the Deployment: %s (all: %s)", got, verbs(out.Actions))
	}
	w.apply(out.Actions)
	w.obs.Service = nil
	if out := w.reconcile(); len(out.Actions) != 1 || out.Actions[0].AfterDeployment {
		t.Fatalf("with the Deployment ours, nothing waits: %+v", out.Actions)
	}
}

// TestWaitsForAPredecessorsChildren: children of a deleted isvc of the same name are not a
// conflict: the garbage collector removes them, and this one then creates its own.
func TestWaitsForAPredecessorsChildren(t *testing.T) {
	w := newWorld(2)
	stale := desiredDeployment(w.isvc, &w.ext, sharedOf(w.isvc)).DeepCopy()
	stale.OwnerReferences[0].UID = "deleted-isvc"
	w.obs.Deployment = stale
	out := w.reconcile()
	if len(out.Actions) != 0 || len(out.Conflicts) != 0 {
		t.Fatalf("actions %s conflicts %v", verbs(out.Actions), out.Conflicts)
	}
	if out.Status.Phase != crd.PhaseProgressing || out.Status.Reason != ReasonReplacingPrevious || IsWarning(out.Status.Reason) {
		t.Fatalf("status %+v", out.Status)
	}
	w.obs.Deployment = nil
	if got := verbs(w.reconcile().Actions); got != "create Deployment, create Service, create HorizontalPodAutoscaler" {
		t.Fatalf("once collected: %s", got)
	}
}

// TestSpecReplicasKeepsTheHPAsCount: a change of spec.replicas moves the HPA's bounds and keeps
// the count the HPA chose, clamped into them; a raise is a floor, and a count the HPA never
// moved follows the user.
func TestSpecReplicasKeepsTheHPAsCount(t *testing.T) {
	for _, c := range []struct {
		name           string
		hpa, spec, got int32
	}{
		{"raise below the HPA's count", 9, 5, 9},
		{"raise above the HPA's count", 9, 12, 12},
		{"lower keeps the HPA's count", 9, 6, 9},
		{"lower clamps into the new bounds", 9, 2, 6},
		{"the HPA never moved: the user's count", 4, 6, 6},
		{"the HPA never moved: lower too", 4, 2, 2},
		{"to zero", 9, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := converged(t, 4) // bounds 2..12
			d := w.obs.Deployment.DeepCopy()
			d.Spec.Replicas = ptr.To(c.hpa)
			w.obs.Deployment = d
			w.isvc.Spec.Replicas, w.isvc.Generation = c.spec, 2
			out := w.reconcile()
			if len(out.Actions) == 0 || out.Actions[0].Kind != "Deployment" {
				t.Fatalf("actions %s", verbs(out.Actions))
			}
			w.apply(out.Actions)
			if got := *w.obs.Deployment.Spec.Replicas; got != c.got {
				t.Fatalf("replicas %d -> spec %d: Deployment at %d, want %d", c.hpa, c.spec, got, c.got)
			}
			if out := w.reconcile(); len(out.Actions) != 0 {
				t.Fatalf("not converged: %s", verbs(out.Actions))
			}
		})
	}
}

func TestScaleToZeroRemovesTheHPA(t *testing.T) {
	w := converged(t, 2)
	w.isvc.Spec.Replicas, w.isvc.Generation = 0, 2
	out := w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, delete HorizontalPodAutoscaler" {
		t.Fatalf("scale to zero: %s", got)
	}
	w.apply(out.Actions)
	w.podsReady()
	out = w.reconcile()
	if len(out.Actions) != 0 || out.Status.Phase != crd.PhaseReady || meta.FindStatusCondition(out.Status.Conditions, crd.ConditionReady).Reason != ReasonScaledToZero {
		t.Fatalf("at zero: %s %+v", verbs(out.Actions), out.Status)
	}
	w.isvc.Spec.Replicas, w.isvc.Generation = 2, 3
	if got := verbs(w.reconcile().Actions); got != "update Deployment, create HorizontalPodAutoscaler" {
		t.Fatalf("scale from zero: %s", got)
	}
}

func TestStatusIsStableWhenNothingChanges(t *testing.T) {
	w := converged(t, 3)
	before := w.isvc.Status
	w.rv += 100 // time passes
	after := w.reconcile().Status
	for i := range before.Conditions {
		if !before.Conditions[i].LastTransitionTime.Equal(&after.Conditions[i].LastTransitionTime) {
			t.Fatal("lastTransitionTime moved without a transition")
		}
	}
	if !statusEqual(&before, &after) {
		t.Fatalf("status changed with nothing changed:\n%+v\n%+v", before, after)
	}
}

func TestNotReadyReportsTheLayer(t *testing.T) {
	w := converged(t, 3)
	d := w.obs.Deployment.DeepCopy()
	d.Status.ReadyReplicas = 1
	w.obs.Deployment = d
	st := w.reconcile().Status
	c := meta.FindStatusCondition(st.Conditions, crd.ConditionReady)
	if st.Phase != crd.PhaseProgressing || c.Reason != ReasonReplicasNotReady || c.Message != "Deployment qwen3: 1/3 replicas ready" {
		t.Fatalf("%+v %+v", st, c)
	}
}

func TestSetThenNotDrifted(t *testing.T) {
	w := newWorld(5)
	w.isvc.Spec.Image = "vllm/vllm-openai:v0.12.0"
	for name, ext := range map[string]*crd.SpecExtensions{
		"v1alpha1": {},
		"adapters and autoscaling": {
			Adapters:    []crd.Adapter{{Name: "sql", StorageURI: "hf://o/sql"}},
			Autoscaling: &crd.Autoscaling{MinReplicas: 2, MaxReplicas: 7, TargetQueueLength: ptr.To[int32](3)},
			Gateway:     &crd.Gateway{Route: "/r"},
		},
		"engine args, env, cache, startup budget": {
			EngineArgs: []string{"--max-model-len", "8192"},
			Env: []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Cache:                 &crd.Cache{ClaimName: "weights"},
			StartupTimeoutSeconds: ptr.To[int32](7200),
		},
	} {
		t.Run(name, func(t *testing.T) {
			want := DesiredChildren(w.isvc, ext, Features{ServiceMonitors: true, HTTPRoutes: true})
			blankD := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: kinds.ContainerName, VolumeMounts: []corev1.VolumeMount{{Name: "shm", MountPath: "/elsewhere"}, {Name: CacheVolume, MountPath: "/x"}},
					Env: []corev1.EnvVar{{Name: "HAND", Value: "edit"}}}},
				Volumes: []corev1.Volume{{Name: "shm"}, {Name: CacheVolume}, {Name: AdaptersVolume}},
			}}}}
			setDeployment(blankD, want.Deployment, want.Scale)
			if deploymentDrifted(blankD, want.Deployment, want.Scale) {
				t.Fatal("deployment drifted after set")
			}
			blankS := &corev1.Service{}
			setService(blankS, want.Service)
			if serviceDrifted(blankS, want.Service) {
				t.Fatal("service drifted after set")
			}
			blankH := &autoscalingv2.HorizontalPodAutoscaler{}
			setHPA(blankH, want.HPA)
			if hpaDrifted(blankH, want.HPA) {
				t.Fatal("hpa drifted after set")
			}
			if want.PDB == nil {
				t.Fatal("5 replicas (HPA minimum 2) want a PodDisruptionBudget")
			}
			blankP := &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}}
			setPDB(blankP, want.PDB)
			if pdbDrifted(blankP, want.PDB) {
				t.Fatal("pdb drifted after set")
			}
			for _, u := range []*unstructured.Unstructured{want.ServiceMonitor, want.HTTPRoute} {
				if u == nil {
					continue
				}
				blank := &unstructured.Unstructured{Object: map[string]interface{}{"spec": map[string]interface{}{"x": "y"}}}
				setUnstructured(blank, u)
				if unstructuredDrifted(blank, u) {
					t.Fatalf("%s drifted after set", u.GetKind())
				}
			}
		})
	}
}

func TestStatusWorthWriting(t *testing.T) {
	w := converged(t, 3)
	d := w.obs.Deployment.DeepCopy()
	d.Status.ReadyReplicas = 1
	w.obs.Deployment = d
	base := w.reconcile().Status // Progressing, ReplicasNotReady 1/3
	mut := func(f func(s *crd.InferenceServiceStatus)) *crd.InferenceServiceStatus {
		s := base.DeepCopy()
		f(s)
		return s
	}
	cases := []struct {
		name string
		next *crd.InferenceServiceStatus
		want bool
	}{
		{"identical", mut(func(*crd.InferenceServiceStatus) {}), false},
		{"progressing message only", mut(func(s *crd.InferenceServiceStatus) { s.Conditions[0].Message += " (pod b starting)" }), false},
		{"ready count", mut(func(s *crd.InferenceServiceStatus) { s.ReadyReplicas = 2 }), true},
		{"reason", mut(func(s *crd.InferenceServiceStatus) { s.Reason = ReasonStarting }), true},
		{"generation", mut(func(s *crd.InferenceServiceStatus) { s.ObservedGeneration++ }), true},
		{"failing message", mut(func(s *crd.InferenceServiceStatus) {
			s.Phase = crd.PhaseFailed
			s.Conditions[0].Reason, s.Conditions[0].Message = ReasonCrashLoopBackOff, "restarts 5"
		}), true},
	}
	for _, c := range cases {
		if got := WorthWriting(&base, c.next); got != c.want {
			t.Errorf("%s: worth writing %v, want %v", c.name, got, c.want)
		}
	}
}

// TestV1beta1Children: adapters, autoscaling bounds and the disruption budget become children,
// converge, show in status, and go away with the fields that asked for them.
func TestV1beta1Children(t *testing.T) {
	w := newWorld(2) // v1alpha1 replicas derived from autoscaling.minReplicas, as conversion does
	w.ext = crd.SpecExtensions{
		Adapters:      []crd.Adapter{{Name: "sql", StorageURI: "hf://o/sql"}, {Name: "chat", StorageURI: "s3://b/chat"}},
		Autoscaling:   &crd.Autoscaling{MinReplicas: 2, MaxReplicas: 8, TargetQueueLength: ptr.To[int32](2)},
		ReplicasUnset: true,
		Gateway:       &crd.Gateway{Route: "/models/qwen3"},
	}
	w.f = Features{ServiceMonitors: true, HTTPRoutes: true, GatewayParent: types.NamespacedName{Namespace: "gw", Name: "public"}}
	w.ext.Adapters[1].StorageURI = "hf://o/chat"
	out := w.reconcile()
	if got := verbs(out.Actions); got != "create Deployment, create Service, create HorizontalPodAutoscaler, create PodDisruptionBudget, create ServiceMonitor, create HTTPRoute" {
		t.Fatalf("first reconcile: %s", got)
	}
	route := out.Actions[5].Object.(*unstructured.Unstructured)
	if v, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules"); len(v) != len(InferencePaths) || fmt.Sprint(v[0]) != "map[backendRefs:[map[group: kind:Service name:qwen3 port:8000 weight:1]] filters:[map[type:URLRewrite urlRewrite:map[path:map[replacePrefixMatch:/v1/chat/completions type:ReplacePrefixMatch]]]] matches:[map[path:map[type:PathPrefix value:/models/qwen3/v1/chat/completions]]] timeouts:map[request:300s]]" {
		t.Fatalf("HTTPRoute rules %v", v)
	}
	// What a client reaches through the gateway, by the Gateway API's PathPrefix matching
	// (whole path elements) and ReplacePrefixMatch: inference, never the adapter admin API.
	for path, want := range map[string]string{
		"/models/qwen3/v1/chat/completions":    "/v1/chat/completions",
		"/models/qwen3/v1/completions":         "/v1/completions",
		"/models/qwen3/v1/models":              "/v1/models",
		"/models/qwen3/v1/load_lora_adapter":   "",
		"/models/qwen3/v1/unload_lora_adapter": "",
		"/models/qwen3/metrics":                "",
		"/models/qwen3/health":                 "",
		"/models/qwen3/v1/completionsX":        "",
		"/models/qwen3/reset_prefix_cache":     "",
	} {
		if got := httpRouteRewrite(route, path); got != want {
			t.Errorf("gateway %s reaches %q, want %q", path, got, want)
		}
	}
	if ref := route.GetOwnerReferences(); len(ref) != 1 || ref[0].UID != w.isvc.UID || !*ref[0].Controller {
		t.Fatalf("HTTPRoute owner %v", ref)
	}
	d := out.Actions[0].Object.(*appsv1.Deployment)
	h := out.Actions[2].Object.(*autoscalingv2.HorizontalPodAutoscaler)
	pdb := out.Actions[3].Object.(*policyv1.PodDisruptionBudget)
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, vllm.EnableLoRAArg) || !slices.Contains(c.Env, runtimeLoRA) || hasVolumeNamed(d.Spec.Template.Spec.Volumes, AdaptersVolume) {
		t.Fatalf("deployment: args %v env %v volumes %v", c.Args, c.Env, d.Spec.Template.Spec.Volumes)
	}
	if *d.Spec.Replicas != 2 || *h.Spec.MinReplicas != 2 || h.Spec.MaxReplicas != 8 || h.Spec.Metrics[0].Pods.Target.AverageValue.Value() != 2 {
		t.Fatalf("scale: deploy %d hpa %d..%d target %v", *d.Spec.Replicas, *h.Spec.MinReplicas, h.Spec.MaxReplicas, h.Spec.Metrics[0].Pods.Target.AverageValue)
	}
	if pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Fatalf("pdb %+v", pdb.Spec)
	}
	if len(out.StatusExt.LoadedAdapters) != 0 || len(out.AdapterSteps) != 0 {
		t.Fatalf("adapters before any pod is ready: %v, steps %v", out.StatusExt.LoadedAdapters, out.AdapterSteps)
	}
	w.apply(out.Actions)
	w.podsReady()
	out = w.reconcile()
	// Requested is not loaded: the pods list nothing yet, so status claims nothing.
	if len(out.Actions) != 0 || len(out.StatusExt.LoadedAdapters) != 0 || len(out.AdapterSteps) != 4 {
		t.Fatalf("pods ready: %s, loaded %v, steps %+v", verbs(out.Actions), out.StatusExt.LoadedAdapters, out.AdapterSteps)
	}
	if c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionAdaptersReady); c == nil || c.Reason != ReasonAdaptersLoading {
		t.Fatalf("AdaptersReady %+v", c)
	}
	w.applySteps(t, out.AdapterSteps)
	out = w.reconcile()
	if len(out.Actions) != 0 || len(out.AdapterSteps) != 0 || out.Status.Phase != crd.PhaseReady {
		t.Fatalf("not converged: %s %v %+v", verbs(out.Actions), out.AdapterSteps, out.Status)
	}
	if got := out.StatusExt; got.Endpoint != "http://qwen3.default.svc:8000" || !slices.Equal(got.LoadedAdapters, []string{"sql", "chat"}) || got.ModelName != "Qwen/Qwen3-0.6B" {
		t.Fatalf("status extensions %+v", got)
	}
	if !meta.IsStatusConditionTrue(out.Status.Conditions, crd.ConditionAdaptersReady) {
		t.Fatalf("AdaptersReady %+v", out.Status.Conditions)
	}

	// The HPA picks 8 (its maximum): the operator leaves it.
	dd := w.obs.Deployment.DeepCopy()
	dd.Spec.Replicas = ptr.To[int32](8)
	w.obs.Deployment = dd
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("fights the HPA inside autoscaling bounds: %s", verbs(out.Actions))
	}
	// Bounds change to 3..10: the HPA's 8 stays (no user's count to apply); only the HPA moves.
	w.ext.Autoscaling = &crd.Autoscaling{MinReplicas: 3, MaxReplicas: 10, TargetQueueLength: ptr.To[int32](2)}
	w.isvc.Spec.Replicas, w.isvc.Generation = 3, w.isvc.Generation+1
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, update HorizontalPodAutoscaler" {
		t.Fatalf("bounds 3..10: %s", got)
	}
	if n := *out.Actions[0].Object.(*appsv1.Deployment).Spec.Replicas; n != 8 {
		t.Fatalf("bounds changed: deployment replicas %d, want the HPA's 8", n)
	}
	w.apply(out.Actions)
	// Bounds shrink to 2..6: the count comes down to the new maximum.
	w.ext.Autoscaling = &crd.Autoscaling{MinReplicas: 2, MaxReplicas: 6, TargetQueueLength: ptr.To[int32](2)}
	w.isvc.Spec.Replicas, w.isvc.Generation = 2, w.isvc.Generation+1
	out = w.reconcile()
	if n := *out.Actions[0].Object.(*appsv1.Deployment).Spec.Replicas; n != 6 {
		t.Fatalf("bounds 2..6 with 8 pods: deployment replicas %d, want 6", n)
	}
	w.apply(out.Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged after bounds changes: %s", verbs(out.Actions))
	}

	// Adapters removed: each pod unloads them; --enable-lora goes with the last one.
	w.ext.Adapters = nil
	w.isvc.Generation++
	out = w.reconcile()
	var listed int
	for _, l := range w.servers {
		listed += len(l)
	}
	if got := verbs(out.Actions); got != "update Deployment" || len(out.AdapterSteps) != listed || slices.ContainsFunc(out.AdapterSteps, func(s AdapterStep) bool { return s.Load }) {
		t.Fatalf("adapters removed: %s, steps %+v", got, out.AdapterSteps)
	}
	d = out.Actions[0].Object.(*appsv1.Deployment)
	if slices.Contains(d.Spec.Template.Spec.Containers[0].Args, vllm.EnableLoRAArg) || slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name != HFHomeEnv }) {
		t.Fatalf("LoRA still enabled: %+v", d.Spec.Template.Spec.Containers[0])
	}
	w.apply(out.Actions)
	w.applySteps(t, out.AdapterSteps)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 || len(out.AdapterSteps) != 0 || len(out.StatusExt.LoadedAdapters) != 0 ||
		meta.FindStatusCondition(out.Status.Conditions, crd.ConditionAdaptersReady) != nil {
		t.Fatalf("not converged after removing adapters: %s %v %+v", verbs(out.Actions), out.StatusExt, out.Status.Conditions)
	}

	// The gateway section removed: the HTTPRoute goes; the ServiceMonitor stays.
	w.ext.Gateway = nil
	w.isvc.Generation++
	out = w.reconcile()
	if got := verbs(out.Actions); got != "delete HTTPRoute" {
		t.Fatalf("gateway removed: %s", got)
	}
	w.apply(out.Actions)

	// Autoscaling down to one pod: the budget goes.
	w.ext.Autoscaling = &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 3}
	w.isvc.Spec.Replicas, w.isvc.Generation = 1, w.isvc.Generation+1
	out = w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment, update HorizontalPodAutoscaler, delete PodDisruptionBudget" {
		t.Fatalf("min 1: %s", got)
	}
}

// httpRouteRewrite is the path the backend sees for a request path through the route, ""
// when no rule matches: PathPrefix matches whole path elements; the longest prefix wins.
func httpRouteRewrite(route *unstructured.Unstructured, path string) string {
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	best, out := -1, ""
	for _, r := range rules {
		rm := r.(map[string]interface{})
		rewrite := ""
		if fs, ok := rm["filters"].([]interface{}); ok && len(fs) > 0 {
			rewrite, _, _ = unstructured.NestedString(fs[0].(map[string]interface{}), "urlRewrite", "path", "replacePrefixMatch")
		}
		for _, m := range rm["matches"].([]interface{}) {
			p, _, _ := unstructured.NestedString(m.(map[string]interface{}), "path", "value")
			if (path == p || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/")) && len(p) > best {
				best, out = len(p), rewrite+strings.TrimPrefix(path, p)
			}
		}
	}
	return out
}
