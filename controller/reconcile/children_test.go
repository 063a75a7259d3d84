package reconcile

import (
	"fmt"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

func TestDesiredResources(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name     string
		spec     crd.InferenceServiceSpec
		req, lim map[string]string
	}{
		{"defaults", crd.InferenceServiceSpec{}, map[string]string{"cpu": "2", "memory": "10Gi", "nvidia.com/gpu": "1"}, map[string]string{"nvidia.com/gpu": "1"}},
		{"no gpus", crd.InferenceServiceSpec{GPUsPerReplica: ptr.To[int32](0)}, map[string]string{"cpu": "2", "memory": "10Gi"}, nil},
		{"memory limit below the default request", crd.InferenceServiceSpec{Resources: &crd.Resources{Limits: corev1.ResourceList{"memory": q("4Gi")}}},
			map[string]string{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}, map[string]string{"memory": "4Gi", "nvidia.com/gpu": "1"}},
		{"limit above the default request", crd.InferenceServiceSpec{Resources: &crd.Resources{Limits: corev1.ResourceList{"cpu": q("8")}}},
			map[string]string{"cpu": "2", "memory": "10Gi", "nvidia.com/gpu": "1"}, map[string]string{"cpu": "8", "nvidia.com/gpu": "1"}},
		{"limit without any request", crd.InferenceServiceSpec{Resources: &crd.Resources{Limits: corev1.ResourceList{"ephemeral-storage": q("10Gi")}}},
			map[string]string{"cpu": "2", "memory": "10Gi", "ephemeral-storage": "10Gi", "nvidia.com/gpu": "1"}, map[string]string{"ephemeral-storage": "10Gi", "nvidia.com/gpu": "1"}},
		{"eight gpus", crd.InferenceServiceSpec{GPUsPerReplica: ptr.To[int32](8)}, map[string]string{"cpu": "2", "memory": "38Gi", "nvidia.com/gpu": "8"}, map[string]string{"nvidia.com/gpu": "8"}},
		{"user memory request", crd.InferenceServiceSpec{Resources: &crd.Resources{Requests: corev1.ResourceList{"memory": q("64Gi")}}},
			map[string]string{"cpu": "2", "memory": "64Gi", "nvidia.com/gpu": "1"}, map[string]string{"nvidia.com/gpu": "1"}},
		{"user requests and another gpu vendor", crd.InferenceServiceSpec{GPUsPerReplica: ptr.To[int32](2), Resources: &crd.Resources{GPUResourceName: "amd.com/gpu", Requests: corev1.ResourceList{"cpu": q("500m")}}},
			map[string]string{"cpu": "500m", "memory": "14Gi", "amd.com/gpu": "2"}, map[string]string{"amd.com/gpu": "2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := desiredResources(&c.spec)
			check := func(what string, have corev1.ResourceList, want map[string]string) {
				if len(have) != len(want) {
					t.Fatalf("%s: %v, want %v", what, have, want)
				}
				for k, v := range want {
					if h := have[corev1.ResourceName(k)]; h.Cmp(q(v)) != 0 {
						t.Fatalf("%s[%s] = %s, want %s", what, k, h.String(), v)
					}
				}
			}
			check("requests", got.Requests, c.req)
			check("limits", got.Limits, c.lim)
		})
	}
}

func TestPriorityAndQueue(t *testing.T) {
	w := newWorld(1)
	w.isvc.Spec.PriorityClassName, w.isvc.Spec.QueueName = "online-high", "team-a"
	d := desiredDeployment(w.isvc, &crd.SpecExtensions{}, sharedOf(w.isvc))
	if d.Spec.Template.Spec.PriorityClassName != "online-high" || d.Labels[QueueLabel] != "team-a" || d.Spec.Template.Labels[QueueLabel] != "team-a" {
		t.Fatalf("priority %q labels %v / %v", d.Spec.Template.Spec.PriorityClassName, d.Labels, d.Spec.Template.Labels)
	}
	if _, ok := desiredService(sharedOf(w.isvc), false).Labels[QueueLabel]; ok {
		t.Fatal("only the pods' owner carries the queue label")
	}
	w.apply(w.reconcile().Actions)
	w.isvc.Spec.PriorityClassName = "offline-low"
	out := w.reconcile()
	if verbs(out.Actions) != "update Deployment" || out.Actions[0].Object.(interface{ GetName() string }).GetName() != "qwen3" {
		t.Fatalf("priority change: %s", verbs(out.Actions))
	}
}

// TestKueueDeploymentIntegration: Kueue v0.17's Deployment integration reads the queue label
// from the Deployment's own metadata, and its webhook then marks the pod template (a label and
// the annotation that makes its pod webhook gate each pod). The operator must carry the label
// there and must neither see that marking as drift (an update on every sync, each one mutated
// again by the webhook) nor strip it when it updates the Deployment for another reason.
func TestKueueDeploymentIntegration(t *testing.T) {
	w := newWorld(1)
	w.isvc.Spec.QueueName = "team-a"
	want := DesiredChildren(w.isvc, &crd.SpecExtensions{}, Features{})
	if want.Deployment.Labels[QueueLabel] != "team-a" {
		t.Fatalf("the Deployment's labels %v lack %s", want.Deployment.Labels, QueueLabel)
	}
	live := want.Deployment.DeepCopy()
	tmpl := &live.Spec.Template
	tmpl.Labels["kueue.x-k8s.io/managed"] = "true"
	tmpl.Annotations = map[string]string{"kueue.x-k8s.io/pod-suspending-parent": "deployment"}
	if deploymentDrifted(live, want.Deployment, want.Scale) {
		t.Fatal("Kueue's marks on the pod template read as drift")
	}
	w.isvc.Spec.Image = "vllm/vllm-openai:v0.12.0"
	changed := DesiredChildren(w.isvc, &crd.SpecExtensions{}, Features{})
	setDeployment(live, changed.Deployment, changed.Scale)
	if tmpl.Annotations["kueue.x-k8s.io/pod-suspending-parent"] != "deployment" || tmpl.Labels["kueue.x-k8s.io/managed"] != "true" || tmpl.Labels[QueueLabel] != "team-a" {
		t.Fatalf("an update dropped Kueue's marks: labels %v annotations %v", tmpl.Labels, tmpl.Annotations)
	}
}

// TestMain checks, after every test of the package has run, that nothing wrote through the
// parts every desired Deployment shares (children.go): a write there would change every
// model's Deployment at once.
func TestMain(m *testing.M) {
	type parts struct {
		Health              *corev1.HTTPGetAction
		Readiness, Live     *corev1.Probe
		Ports               []corev1.ContainerPort
		Shm                 *corev1.EmptyDirVolumeSource
		Env                 []corev1.EnvVar
		PortArg, APIVersion string
	}
	snapshot := func() parts {
		return parts{health.DeepCopy(), readinessProbe.DeepCopy(), livenessProbe.DeepCopy(),
			slices.Clone(vllmPorts), shmSource.DeepCopy(), []corev1.EnvVar{*runtimeLoRA.DeepCopy(), *cacheEnv.DeepCopy()}, portArg, apiVersion}
	}
	before := snapshot()
	code := m.Run()
	if after := snapshot(); !equality.Semantic.DeepEqual(before, after) || len(vllmPorts) != 1 {
		fmt.Fprintf(os.Stderr, "shared parts of the desired children were written to:\nbefore %+v\nafter  %+v\n", before, after)
		code = 1
	}
	for k, r := range sharedResources.m {
		spec := &crd.InferenceServiceSpec{GPUsPerReplica: &k.gpus, Resources: &crd.Resources{GPUResourceName: string(k.gpu)}}
		if want := buildResources(spec); !equality.Semantic.DeepEqual(r, want) {
			fmt.Fprintf(os.Stderr, "shared resources of %v were written to: %+v, want %+v\n", k, r, want)
			code = 1
		}
	}
	os.Exit(code)
}

// Without spec.cache the weights still outlive a container restart (an emptyDir under
// HF_HOME), and a user's own HF_HOME wins over the operator's without a duplicate.
func TestHFHomeWithoutCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []corev1.EnvVar
		want []string // HF_HOME values in order
	}{
		{"default", nil, []string{crd.CachePath}},
		{"the user's", []corev1.EnvVar{{Name: HFHomeEnv, Value: "/data/hf"}}, []string{"/data/hf"}},
	} {
		ext := &crd.SpecExtensions{Env: tc.env}
		var got []string
		for _, e := range desiredEnv(ext) {
			if e.Name == HFHomeEnv {
				got = append(got, e.Value)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: HF_HOME %v, want %v", tc.name, got, tc.want)
		}
		c := desiredContainer(&crd.InferenceServiceSpec{Model: "m"}, ext)
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == CacheVolume && m.MountPath == crd.CachePath }) {
			t.Errorf("%s: no cache mount: %v", tc.name, c.VolumeMounts)
		}
	}
}

// The model runs under `vllm serve` whatever the image's entrypoint (the v0.11.0 image's
// api_server ignores a positional model), and a hand edit of the command, seen through the
// cache, is reverted.
func TestServeCommand(t *testing.T) {
	w := newWorld(1)
	w.apply(w.reconcile().Actions)
	c := &w.obs.Deployment.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"vllm", "serve"}) || c.Args[0] != "Qwen/Qwen3-0.6B" {
		t.Fatalf("command %q args %q", c.Command, c.Args)
	}
	d := w.obs.Deployment.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Command = []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}
	w.obs.Deployment = d
	out := w.reconcile()
	if verbs(out.Actions) != "update Deployment" {
		t.Fatalf("hand edit of the command: %s", verbs(out.Actions))
	}
	w.apply(out.Actions)
	if got := w.obs.Deployment.Spec.Template.Spec.Containers[0].Command; !slices.Equal(got, []string{"vllm", "serve"}) {
		t.Fatalf("command kept: %q", got)
	}
}
