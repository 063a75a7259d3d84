package crd

import (
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzConversionRoundTrip: for any v1beta1 object (b) and its v1alpha1 form (a),
// b -> a -> b and a -> b -> a are identical, and a plain v1alpha1 object survives a -> b -> a.
//
//	go test ./crd -run XXX -fuzz FuzzConversionRoundTrip -fuzztime 60s
func FuzzConversionRoundTrip(f *testing.F) {
	f.Add("Qwen/Qwen3-0.6B", int32(3), uint8(0), "sql", "hf://x", int32(1), int32(4), int32(2), "/r", int32(1), "img", int64(2), "ann", "ep", uint8(0))
	f.Add("m", int32(0), uint8(1), "", "", int32(2), int32(1), int32(0), "", int32(0), "", int64(0), "", "", uint8(3))
	f.Add("m", int32(5), uint8(2), "a", "s3://b", int32(0), int32(0), int32(-1), "/", int32(-1), "", int64(-3), "x", "", uint8(7))
	f.Add("m", int32(1), uint8(0), "HF_TOKEN", "--max-model-len", int32(600), int32(0), int32(-1), "/r", int32(1), "weights", int64(1), "token", "ep", uint8(15))
	f.Add("m", int32(1), uint8(0), "", "", int32(2), int32(3), int32(-1), "", int32(6), "", int64(0), "", "", uint8(18))
	f.Add("m", int32(2), uint8(1), "", "", int32(2), int32(8), int32(4), "", int32(-1), "", int64(0), "", "", uint8(50))
	f.Add("m", int32(2), uint8(0), "", "", int32(0), int32(0), int32(0), "", int32(0), "", int64(0), "", "", uint8(32))
	f.Fuzz(func(t *testing.T, model string, replicas int32, shape uint8, adapter, uri string, lo, hi, tql int32, route string, prio int32, image string, cpu int64, ann, endpoint string, opt uint8) {
		for _, s := range []string{model, adapter, uri, route, image, ann, endpoint} {
			if !utf8.ValidString(s) {
				t.Skip("objects reach the webhook as JSON, always valid UTF-8")
			}
		}
		b := &InferenceServiceV1beta1{
			TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersionV1beta1.String(), Kind: Kind},
			ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns"},
			// spec.engine as the API server serves it: defaulted, never empty.
			Spec:   InferenceServiceSpecV1beta1{BaseModel: model, Image: image, Engine: Engines[int(opt>>6)%len(Engines)]},
			Status: InferenceServiceStatusV1beta1{Endpoint: endpoint, Replicas: replicas},
		}
		if ann != "" {
			b.Annotations = map[string]string{"user/" + ann: ann}
		}
		// shape: replicas only, autoscaling only, both, neither (the last two the API refuses).
		if shape%4 == 0 || shape%4 == 2 {
			b.Spec.Replicas = &replicas
		}
		if shape%4 == 1 || shape%4 == 2 {
			b.Spec.Autoscaling = &Autoscaling{MinReplicas: lo, MaxReplicas: hi}
			if tql >= 0 {
				b.Spec.Autoscaling.TargetQueueLength = &tql
			}
			if prio >= 0 {
				b.Spec.Autoscaling.ScaleDownDelaySeconds = &prio
			}
		}
		if adapter != "" {
			b.Spec.Adapters = []Adapter{{Name: adapter, StorageURI: uri}, {Name: adapter + "2", StorageURI: uri}}
			b.Status.LoadedAdapters = []string{adapter}
		}
		if opt&1 != 0 {
			b.Spec.Gateway = &Gateway{Route: route}
			if prio >= 0 {
				b.Spec.Gateway.Priority = &prio
			}
		}
		if opt&2 != 0 {
			b.Spec.GPUsPerReplica = &prio
			b.Spec.PriorityClassName, b.Spec.QueueName = route, adapter
		}
		if opt&4 != 0 {
			b.Spec.Resources = &Resources{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI)}, GPUResourceName: uri}
			b.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Available", Message: endpoint}}
		}

		if opt&8 != 0 {
			b.Spec.EngineArgs = []string{adapter, uri}
			b.Spec.Env = []corev1.EnvVar{{Name: adapter, Value: uri}, {Name: route, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: image}, Key: ann}}}}
			b.Spec.Cache = &Cache{ClaimName: image}
			b.Spec.StartupTimeoutSeconds = &lo
			b.Status.ModelName, b.Status.RoutePath = model, route
		}
		// spec.parallelism and spec.multiNode, each size zero included (the API refuses it,
		// conversion keeps it), multiNode's optional sizes set or not.
		if opt&16 != 0 {
			b.Spec.Parallelism = &Parallelism{TensorParallelSize: lo, PipelineParallelSize: hi}
		}
		if opt&32 != 0 {
			b.Spec.MultiNode = &MultiNode{Nodes: hi}
			if tql >= 0 {
				b.Spec.MultiNode.TensorParallelSize = &tql
			}
			if prio >= 0 {
				b.Spec.MultiNode.PipelineParallelSize = &prio
			}
		}

		wantB := mustJSON(t, b)
		a, err := ConvertFromV1beta1(b)
		if err != nil {
			t.Fatal(err)
		}
		wantA := mustJSON(t, a)
		b2, err := ConvertToV1beta1(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := mustJSON(t, b2); got != wantB {
			t.Fatalf("v1beta1 -> v1alpha1 -> v1beta1:\n got %s\nwant %s", got, wantB)
		}
		a2, err := ConvertFromV1beta1(b2)
		if err != nil {
			t.Fatal(err)
		}
		if got := mustJSON(t, a2); got != wantA {
			t.Fatalf("v1alpha1 -> v1beta1 -> v1alpha1:\n got %s\nwant %s", got, wantA)
		}
		if mustJSON(t, b) != wantB {
			t.Fatal("conversion modified its input")
		}

		// A v1alpha1 object that never saw v1beta1.
		plain := &InferenceService{TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind}, ObjectMeta: b.ObjectMeta, Spec: a.Spec, Status: a.Status}
		plainJSON := mustJSON(t, plain)
		pb, err := ConvertToV1beta1(plain)
		if err != nil {
			t.Fatal(err)
		}
		pa, err := ConvertFromV1beta1(pb)
		if err != nil {
			t.Fatal(err)
		}
		if got := mustJSON(t, pa); got != plainJSON {
			t.Fatalf("plain v1alpha1 round trip:\n got %s\nwant %s", got, plainJSON)
		}
	})
}
