package crd

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func alpha() *InferenceService {
	return &InferenceService{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "team-a", Labels: map[string]string{"a": "b"}},
		Spec: InferenceServiceSpec{
			Model: "Qwen/Qwen3-0.6B", Replicas: 3, GPUsPerReplica: ptrTo[int32](2), Image: "vllm:x",
			PriorityClassName: "online", QueueName: "q",
			Resources: &Resources{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}, GPUResourceName: "amd.com/gpu"},
		},
		Status: InferenceServiceStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 1, Phase: PhaseProgressing, Reason: "Starting",
			Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: "Starting", Message: "m", LastTransitionTime: metav1.Unix(1700000000, 0)}}},
	}
}

func beta() *InferenceServiceV1beta1 {
	return &InferenceServiceV1beta1{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersionV1beta1.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "team-a", Annotations: map[string]string{"keep": "me"}},
		Spec: InferenceServiceSpecV1beta1{
			BaseModel:   "Qwen/Qwen3-8B",
			Engine:      EngineVLLM, // the schema default, as the API server serves it
			Adapters:    []Adapter{{Name: "sql", StorageURI: "hf://org/sql-lora"}, {Name: "chat", StorageURI: "s3://b/chat"}},
			Autoscaling: &Autoscaling{MinReplicas: 2, MaxReplicas: 8, TargetQueueLength: ptrTo[int32](5), ScaleDownDelaySeconds: ptrTo[int32](600)},
			Gateway:     &Gateway{Route: "/qwen", Priority: ptrTo[int32](10)},
			EngineArgs:  []string{"--max-model-len", "8192", "--trust-remote-code"},
			Env: []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}}},
			Cache:                 &Cache{ClaimName: "weights"},
			StartupTimeoutSeconds: ptrTo[int32](7200),
			GPUsPerReplica:        ptrTo[int32](6),
			Parallelism:           &Parallelism{TensorParallelSize: 2, PipelineParallelSize: 3},
		},
		Status: InferenceServiceStatusV1beta1{Phase: PhaseReady, LoadedAdapters: []string{"sql"}, Endpoint: "http://qwen3.team-a.svc:8000/v1",
			ModelName: "Qwen/Qwen3-8B", RoutePath: "/qwen",
			LastStart: &StartRecord{Pod: "qwen3-7d9f-x2", Started: "2026-12-05T14:00:00Z", ServingAt: "2026-12-05T14:17:00Z", TotalSeconds: 1020,
				Phases:  []StartPhase{{Name: "scheduled", Seconds: 1}, {Name: "weights download", Seconds: 840}, {Name: "weights load", Seconds: 179}},
				Slowest: "weights download"}},
	}
}

func TestConvertV1alpha1RoundTrip(t *testing.T) {
	in := alpha()
	want := mustJSON(t, in)
	b, err := ConvertToV1beta1(in)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.BaseModel != in.Spec.Model || b.Spec.Replicas == nil || *b.Spec.Replicas != 3 || b.Spec.Autoscaling != nil || b.Annotations != nil {
		t.Fatalf("v1beta1 = %s", mustJSON(t, b))
	}
	a, err := ConvertFromV1beta1(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, a); got != want {
		t.Fatalf("v1alpha1 -> v1beta1 -> v1alpha1:\n got %s\nwant %s", got, want)
	}
	if mustJSON(t, in) != want {
		t.Fatal("conversion modified its input")
	}
}

func TestConvertV1beta1RoundTrip(t *testing.T) {
	in := beta()
	want := mustJSON(t, in)
	a, err := ConvertFromV1beta1(in)
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec.Model != "Qwen/Qwen3-8B" || a.Spec.Replicas != 2 || a.Annotations["keep"] != "me" || a.Annotations[AnnotationV1beta1Spec] == "" || a.Annotations[AnnotationV1beta1Status] == "" {
		t.Fatalf("v1alpha1 = %s", mustJSON(t, a))
	}
	b, err := ConvertToV1beta1(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, b); got != want {
		t.Fatalf("v1beta1 -> v1alpha1 -> v1beta1:\n got %s\nwant %s", got, want)
	}
	if mustJSON(t, in) != want {
		t.Fatal("conversion modified its input")
	}
}

// TestConvertScaleDownDelay: the delay, 0 included (scale down at once, not "unset"), travels
// in v1alpha1's annotation and comes back; unset stays unset.
func TestConvertScaleDownDelay(t *testing.T) {
	for _, delay := range []*int32{ptrTo[int32](0), ptrTo[int32](600), ptrTo[int32](MaxScaleDownDelaySeconds), nil} {
		in := beta()
		in.Spec.Autoscaling.ScaleDownDelaySeconds = delay
		a, err := ConvertFromV1beta1(in)
		if err != nil {
			t.Fatal(err)
		}
		ext, _, err := ExtensionsOf(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := ext.Autoscaling.ScaleDownDelaySeconds; (got == nil) != (delay == nil) || got != nil && *got != *delay {
			t.Fatalf("delay %v: the v1alpha1 form carries %v (annotation %s)", mustJSON(t, delay), mustJSON(t, got), a.Annotations[AnnotationV1beta1Spec])
		}
		b, err := ConvertToV1beta1(a)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := mustJSON(t, b.Spec.Autoscaling), mustJSON(t, in.Spec.Autoscaling); got != want {
			t.Fatalf("round trip: %s, want %s", got, want)
		}
		if c := cloneAutoscaling(in.Spec.Autoscaling); delay != nil {
			was := *delay
			*c.ScaleDownDelaySeconds++
			if *in.Spec.Autoscaling.ScaleDownDelaySeconds != was {
				t.Fatal("cloneAutoscaling shares the delay with its input")
			}
		}
	}
}

// TestConvertParallelism: spec.parallelism travels in v1alpha1's annotation, where the
// controller reads it, and comes back; an object without it (one stored before the field
// existed included) converts without it, its annotation unchanged.
func TestConvertParallelism(t *testing.T) {
	in := beta()
	a, err := ConvertFromV1beta1(in)
	if err != nil {
		t.Fatal(err)
	}
	ext, _, err := ExtensionsOf(a)
	if err != nil {
		t.Fatal(err)
	}
	if p := ext.Parallelism; p == nil || *p != (Parallelism{TensorParallelSize: 2, PipelineParallelSize: 3}) || a.Spec.GPUs() != 6 {
		t.Fatalf("v1alpha1 carries %s, gpus %d (annotation %s)", mustJSON(t, p), a.Spec.GPUs(), a.Annotations[AnnotationV1beta1Spec])
	}

	old := alpha()
	old.Annotations = map[string]string{AnnotationV1beta1Spec: `{"multiNode":{"nodes":2}}`}
	b, err := ConvertToV1beta1(old)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.Parallelism != nil || b.Spec.MultiNode == nil {
		t.Fatalf("an annotation from before spec.parallelism: %s", mustJSON(t, b.Spec))
	}
	back, err := ConvertFromV1beta1(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Annotations[AnnotationV1beta1Spec]; got != `{"multiNode":{"nodes":2}}` {
		t.Fatalf("annotation rewritten to %s", got)
	}
}

// kubectl scale through v1alpha1 on an autoscaling v1beta1 object: the fixed count wins.
func TestConvertReplicasChangedThroughV1alpha1(t *testing.T) {
	a, err := ConvertFromV1beta1(beta())
	if err != nil {
		t.Fatal(err)
	}
	a.Spec.Replicas = 6
	b, err := ConvertToV1beta1(a)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.Replicas == nil || *b.Spec.Replicas != 6 || b.Spec.Autoscaling != nil || len(b.Spec.Adapters) != 2 {
		t.Fatalf("got %s", mustJSON(t, b.Spec))
	}
}

func TestConvertBadAnnotation(t *testing.T) {
	a := alpha()
	a.Annotations = map[string]string{AnnotationV1beta1Spec: "{not json"}
	if _, err := ConvertToV1beta1(a); err == nil {
		t.Fatal("want an error for an unreadable annotation")
	}
}

func TestConvertJSON(t *testing.T) {
	raw := []byte(mustJSON(t, beta()))
	for _, tc := range []struct{ to, wantErr string }{
		{to: GroupVersion.String()},
		{to: GroupVersionV1beta1.String()},
		{to: "ai.example.com/v2", wantErr: `unsupported target apiVersion "ai.example.com/v2"`},
	} {
		out, err := Convert(raw, tc.to)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("to %s: error %v, want %s", tc.to, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("to %s: %v", tc.to, err)
		}
		back, err := Convert(out, GroupVersionV1beta1.String())
		if err != nil {
			t.Fatal(err)
		}
		if string(back) != string(raw) {
			t.Errorf("via %s:\n got %s\nwant %s", tc.to, back, raw)
		}
	}
	if _, err := Convert([]byte(`{"apiVersion":"ai.example.com/v1alpha1","kind":"Other"}`), GroupVersionV1beta1.String()); err == nil {
		t.Error("want an error for another kind")
	}
}
