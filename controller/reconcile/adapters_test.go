package reconcile

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
)

func TestAdapterPath(t *testing.T) {
	for uri, want := range map[string]string{
		"hf://org/sql-lora": "org/sql-lora", "hf://sql-lora": "sql-lora", "/mnt/adapters/sql": "/mnt/adapters/sql",
		"file:///mnt/a": "/mnt/a",
	} {
		if got, err := AdapterPath(uri); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", uri, got, err, want)
		}
	}
	for _, uri := range []string{"s3://bucket/chat", "gs://b/x", "https://example.com/a", "http://x/a", "hf://", "hf://a/b/c", "relative/path", "file://rel"} {
		if got, err := AdapterPath(uri); err == nil {
			t.Errorf("%s: %q, want an error", uri, got)
		}
	}
	if _, err := AdapterPath("s3://bucket/chat"); err == nil || !strings.Contains(err.Error(), "s3://") {
		t.Errorf("the error names the scheme: %v", err)
	}
}

func TestPlanAdapters(t *testing.T) {
	want := []crd.Adapter{{Name: "sql", StorageURI: "hf://o/sql"}, {Name: "chat", StorageURI: "hf://o/chat"}}
	sql, chat := LoadedAdapter{"sql", "o/sql"}, LoadedAdapter{"chat", "o/chat"}
	cases := []struct {
		name   string
		want   []crd.Adapter
		pods   []PodAdapters
		steps  string
		loaded []string
		cond   string
	}{
		{"not observed", want, nil, "", nil, "Unknown AdaptersNotObserved"},
		{"unreachable pod", want, []PodAdapters{{Pod: "a", Err: "connection refused"}}, "", nil, "Unknown AdaptersNotObserved"},
		{"new pod", want, []PodAdapters{{Pod: "a", IP: "1"}}, "load a sql o/sql, load a chat o/chat", nil, "False AdaptersLoading"},
		{"all loaded", want, []PodAdapters{{Pod: "a", Loaded: []LoadedAdapter{chat, sql}}, {Pod: "b", Loaded: []LoadedAdapter{sql, chat}}}, "", []string{"sql", "chat"}, "True AdaptersLoaded"},
		{"one pod lacks one", want, []PodAdapters{{Pod: "a", Loaded: []LoadedAdapter{sql, chat}}, {Pod: "b", Loaded: []LoadedAdapter{sql}}}, "load b chat o/chat", []string{"sql"}, "False AdaptersLoading"},
		{"unreachable pod does not count", want, []PodAdapters{{Pod: "a", Loaded: []LoadedAdapter{sql, chat}}, {Pod: "b", Err: "timeout"}}, "", []string{"sql", "chat"}, "True AdaptersLoaded"},
		{"unwanted unloaded", want[:1], []PodAdapters{{Pod: "a", Loaded: []LoadedAdapter{sql, chat}}}, "unload a chat o/chat", []string{"sql"}, "True AdaptersLoaded"},
		{"moved adapter reloaded", []crd.Adapter{{Name: "sql", StorageURI: "hf://o/sql-v2"}}, []PodAdapters{{Pod: "a", Loaded: []LoadedAdapter{sql}}}, "unload a sql o/sql, load a sql o/sql-v2", nil, "False AdaptersLoading"},
		{"failed load planned again and reported", want, []PodAdapters{{Pod: "a", Loaded: []LoadedAdapter{sql}, Failed: map[string]string{"chat": "rank 64 > max_lora_rank 16"}}},
			"load a chat o/chat", []string{"sql"}, "False AdapterLoadFailed"},
		{"unsupported source", []crd.Adapter{want[0], {Name: "s3", StorageURI: "s3://b/x"}}, []PodAdapters{{Pod: "a", Loaded: []LoadedAdapter{sql}}}, "", []string{"sql"}, "False AdapterSourceUnsupported"},
		{"none wanted", nil, []PodAdapters{{Pod: "a", Loaded: []LoadedAdapter{sql}}}, "unload a sql o/sql", nil, "True AdaptersLoaded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planAdapters(c.want, c.pods)
			var steps []string
			for _, s := range p.steps {
				verb := "unload"
				if s.Load {
					verb = "load"
				}
				steps = append(steps, verb+" "+s.Pod+" "+s.Name+" "+s.Path)
			}
			if got := strings.Join(steps, ", "); got != c.steps {
				t.Errorf("steps %q, want %q", got, c.steps)
			}
			if !slices.Equal(p.loaded, c.loaded) {
				t.Errorf("loaded %v, want %v", p.loaded, c.loaded)
			}
			if got := string(p.cond.status) + " " + p.cond.reason; got != c.cond {
				t.Errorf("condition %s (%s), want %s", got, p.cond.detail, c.cond)
			}
		})
	}
}

// A failed load and an unsupported source are reported, with the adapter, the pod and the
// server's own words, while the base model keeps serving (Ready True), and bring a Warning.
func TestAdapterFailureReported(t *testing.T) {
	w := newWorld(1)
	w.ext.Adapters = []crd.Adapter{{Name: "sql", StorageURI: "hf://o/sql"}, {Name: "chat", StorageURI: "s3://bucket/chat"}}
	w.loadFails = map[string]string{"sql": "The base model does not support LoRA adapters of rank 64"}
	w.apply(w.reconcile().Actions)
	w.podsReady()
	stored := w.isvc.Status.DeepCopy()
	out := w.reconcile()
	w.applySteps(t, out.AdapterSteps)
	out = w.reconcile()
	if len(out.Actions) != 0 || len(out.StatusExt.LoadedAdapters) != 0 {
		t.Fatalf("actions %s, loaded %v", verbs(out.Actions), out.StatusExt.LoadedAdapters)
	}
	if !meta.IsStatusConditionTrue(out.Status.Conditions, crd.ConditionReady) {
		t.Fatalf("the base model serves: Ready %+v", out.Status.Conditions)
	}
	c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionAdaptersReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonAdapterSourceUnsupported ||
		!strings.Contains(c.Message, "adapter chat") || !strings.Contains(c.Message, "s3://") ||
		!strings.Contains(c.Message, "adapter sql on pod qwen3-0: The base model does not support LoRA adapters of rank 64") {
		t.Fatalf("AdaptersReady %+v", c)
	}
	reason, msg, ok := NewWarning(stored, &out.Status)
	if !ok || reason != ReasonAdapterSourceUnsupported || !strings.Contains(msg, "s3://bucket/chat") {
		t.Fatalf("warning %v %q %q", ok, reason, msg)
	}
	// The I/O layer spaces the attempts; the plan keeps asking for the load, and nothing else.
	if len(out.AdapterSteps) != 1 || !out.AdapterSteps[0].Load || out.AdapterSteps[0].Name != "sql" {
		t.Fatalf("steps %+v", out.AdapterSteps)
	}

	// Only the failed load: its own reason.
	w.ext.Adapters = w.ext.Adapters[:1]
	out = w.reconcile()
	if c := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionAdaptersReady); c == nil || c.Reason != ReasonAdapterLoadFailed || out.Status.Reason != ReasonAdapterLoadFailed {
		t.Fatalf("AdaptersReady %+v, reason %s", c, out.Status.Reason)
	}
	// Fixed: the next attempt loads it, and the status says so.
	delete(w.loadFails, "sql")
	w.applySteps(t, out.AdapterSteps)
	out = w.reconcile()
	if !slices.Equal(out.StatusExt.LoadedAdapters, []string{"sql"}) || out.Status.Phase != crd.PhaseReady || len(out.AdapterSteps) != 0 {
		t.Fatalf("after the fix: %v %+v %v", out.StatusExt.LoadedAdapters, out.Status, out.AdapterSteps)
	}
}

// An adapter ConfigMap an earlier version created is deleted once the Deployment no longer
// mounts it; someone else's namesake is left alone.
func TestOldAdapterConfigMapDeleted(t *testing.T) {
	w := newWorld(1)
	w.ext.Adapters = []crd.Adapter{{Name: "sql", StorageURI: "hf://o/sql"}}
	w.apply(w.reconcile().Actions)
	// The earlier version's children: its volume in the template, its ConfigMap.
	d := w.obs.Deployment.DeepCopy()
	ps := &d.Spec.Template.Spec
	ps.Volumes = append(ps.Volumes, corev1.Volume{Name: AdaptersVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: AdaptersConfigMapName("qwen3")}}}})
	ps.Containers[0].VolumeMounts = append(ps.Containers[0].VolumeMounts, corev1.VolumeMount{Name: AdaptersVolume, MountPath: AdaptersPath})
	w.obs.Deployment = d
	cm := &corev1.ConfigMap{ObjectMeta: childMeta(w.isvc)}
	cm.Name = AdaptersConfigMapName("qwen3")
	w.obs.ConfigMap = cm

	out := w.reconcile()
	if got := verbs(out.Actions); got != "update Deployment" {
		t.Fatalf("first the template drops the mount: %s", got)
	}
	w.apply(out.Actions)
	if hasVolumeNamed(w.obs.Deployment.Spec.Template.Spec.Volumes, AdaptersVolume) {
		t.Fatal("old adapter volume kept")
	}
	if got := verbs(w.reconcile().Actions); got != "delete ConfigMap" {
		t.Fatalf("then the ConfigMap goes: %s", got)
	}
	foreign := cm.DeepCopy()
	foreign.OwnerReferences = nil
	w.obs.ConfigMap = foreign
	if got := verbs(w.reconcile().Actions); got != "" {
		t.Fatalf("someone else's ConfigMap: %s", got)
	}
}

// The route's path is reported only while the HTTPRoute is ours and its Gateway accepted it.
func TestRoutePathOnlyWhenAccepted(t *testing.T) {
	w := converged(t, 1)
	w.ext.Gateway = &crd.Gateway{Route: "/models/qwen3"}
	w.f = Features{HTTPRoutes: true, GatewayParent: typesNN("gw", "public")}
	w.apply(w.reconcile().Actions)
	if out := w.reconcile(); out.StatusExt.RoutePath != "" || out.StatusExt.ModelName != "Qwen/Qwen3-0.6B" {
		t.Fatalf("no Gateway accepted the route yet: %+v", out.StatusExt)
	}
	r := w.obs.HTTPRoute.DeepCopy()
	r.SetGeneration(1)
	r.Object["status"] = map[string]interface{}{"parents": []interface{}{map[string]interface{}{
		"parentRef":  map[string]interface{}{"name": "public", "namespace": "gw"},
		"conditions": []interface{}{map[string]interface{}{"type": "Accepted", "status": "False", "observedGeneration": int64(1)}},
	}}}
	w.obs.HTTPRoute = r
	if out := w.reconcile(); out.StatusExt.RoutePath != "" {
		t.Fatalf("refused route reported: %+v", out.StatusExt)
	}
	r = r.DeepCopy()
	r.Object["status"].(map[string]interface{})["parents"].([]interface{})[0].(map[string]interface{})["conditions"] =
		[]interface{}{map[string]interface{}{"type": "Accepted", "status": "True", "observedGeneration": int64(1)}}
	w.obs.HTTPRoute = r
	if out := w.reconcile(); out.StatusExt.RoutePath != "/models/qwen3" || len(out.Actions) != 0 {
		t.Fatalf("accepted route: %+v %s", out.StatusExt, verbs(out.Actions))
	}
}

// The v1beta1 engine fields reach the template, and a hand edit of them is reverted.
func TestTemplateEngineFields(t *testing.T) {
	ext := &crd.SpecExtensions{
		EngineArgs: []string{"--max-model-len", "8192", "--trust-remote-code"},
		Env: []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}}},
		Cache:                 &crd.Cache{ClaimName: "weights"},
		StartupTimeoutSeconds: ptrTo(int32(7200)),
	}
	ps, c := templateOf(t, 4, ext)
	if !slices.Equal(c.Args[len(c.Args)-3:], ext.EngineArgs) {
		t.Errorf("args %v: engineArgs go last", c.Args)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "HF_TOKEN" && e.ValueFrom != nil }) ||
		!slices.Contains(c.Env, corev1.EnvVar{Name: "HF_HOME", Value: crd.CachePath}) {
		t.Errorf("env %v", c.Env)
	}
	if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool {
		return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "weights"
	}) || !hasMount(c.VolumeMounts, corev1.VolumeMount{Name: CacheVolume, MountPath: crd.CachePath}) {
		t.Errorf("cache not mounted: %v %v", ps.Volumes, c.VolumeMounts)
	}
	if b := c.StartupProbe.PeriodSeconds * c.StartupProbe.FailureThreshold; b != 7200 {
		t.Errorf("startup budget %d s, want 7200", b)
	}

	w := newWorld(1)
	w.ext = *ext
	w.apply(w.reconcile().Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged: %s", verbs(out.Actions))
	}
	d := w.obs.Deployment.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "--enforce-eager")
	w.obs.Deployment = d
	out := w.reconcile()
	if verbs(out.Actions) != "update Deployment" {
		t.Fatalf("hand edit of args: %s", verbs(out.Actions))
	}
	w.apply(out.Actions)
	if slices.Contains(w.obs.Deployment.Spec.Template.Spec.Containers[0].Args, "--enforce-eager") {
		t.Fatal("hand edit of args kept")
	}
	// The cache removed: the claim goes, an emptyDir takes its place under HF_HOME, so a
	// restarted container still finds the weights it downloaded.
	w.ext.Cache = nil
	w.apply(w.reconcile().Actions)
	ps, c = &w.obs.Deployment.Spec.Template.Spec, &w.obs.Deployment.Spec.Template.Spec.Containers[0]
	if i := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == CacheVolume }); i < 0 || ps.Volumes[i].EmptyDir == nil || ps.Volumes[i].PersistentVolumeClaim != nil ||
		!slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == CacheVolume && m.MountPath == crd.CachePath }) ||
		!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "HF_HOME" && e.Value == crd.CachePath }) {
		t.Fatalf("no emptyDir under HF_HOME without the cache: %v %v %v", ps.Volumes, c.VolumeMounts, c.Env)
	}
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged without the cache: %s", verbs(out.Actions))
	}
}

func ptrTo[T any](v T) *T { return &v }

func typesNN(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
