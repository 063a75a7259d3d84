package informers

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// A model's objects as the API server serves them (testdata/model, read from the bench
// cluster: defaulted, with status), each cached the way New caches it.
var modelKinds = []struct {
	file    string
	strip   cache.TransformFunc
	packed  bool
	indexed bool
}{
	{"isvc.json", newInferenceServiceDecoder().decode, false, false},
	{"deploy.json", kinds.StripDeployment, true, false},
	{"rs.json", kinds.StripReplicaSet, true, true},
	{"pod.json", func(obj any) (any, error) { return kinds.StripPodSeen(obj, nil, time.Now()) }, true, true},
	{"svc.json", kinds.StripService, true, false},
	{"hpa.json", kinds.StripHPA, true, false},
	// From its dynamic informer, as every optional child: unstructured, packed as its JSON.
	{"netpol.json", packJSON(StripManagedFields), false, false},
}

func cachedForm(k int) cache.TransformFunc {
	if modelKinds[k].packed {
		return pack(modelKinds[k].strip)
	}
	return modelKinds[k].strip
}

// modelJSON is one fixture with model 00001's name and UIDs rewritten to model i's, so every
// cached string is its own allocation, as from the API server.
func modelJSON(t testing.TB, file string, i int) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "model", file))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte("m-00001"), fmt.Appendf(nil, "m-%05d", i))
	// Every UID in the fixtures ends in 12 hex digits; the model's index makes them unique.
	for _, uid := range []string{"2bc49eee6e61", "2fd6f91e505d", "da8aabc66559", "8662f8d30c1a", "068b5d74fa44", "2995f37be712"} {
		b = bytes.ReplaceAll(b, []byte(uid), fmt.Appendf(nil, "%s%06x", uid[:6], i))
	}
	// And what else differs from model to model in a cluster: the pod template's hash, the
	// pod's name and IP, resource versions and times.
	h := uint64(i+1) * 0x9e3779b97f4a7c15
	b = bytes.ReplaceAll(b, []byte("85c76c67b4"), fmt.Appendf(nil, "%010x", h>>24))
	b = bytes.ReplaceAll(b, []byte("d2wld"), fmt.Appendf(nil, "%05x", h>>44))
	b = bytes.ReplaceAll(b, []byte("127.16.0.10"), fmt.Appendf(nil, "127.16.%d.%d", i/250, i%250+2))
	b = resourceVersionRE.ReplaceAllFunc(b, func(m []byte) []byte {
		v, _ := strconv.Atoi(string(resourceVersionRE.FindSubmatch(m)[1]))
		return fmt.Appendf(nil, `"resourceVersion": "%d"`, v+13*i)
	})
	return timeRE.ReplaceAllFunc(b, func(m []byte) []byte {
		t, _ := time.Parse(time.RFC3339, string(m[1:len(m)-1]))
		return fmt.Appendf(nil, "%q", t.Add(time.Duration(i)*1700*time.Millisecond).Format(time.RFC3339))
	})
}

var (
	resourceVersionRE = regexp.MustCompile(`"resourceVersion": *"([0-9]+)"`)
	timeRE            = regexp.MustCompile(`"2026-12-04T[0-9:]+Z"`)
)

func decodeModelObject(t testing.TB, file string, b []byte) any {
	t.Helper()
	if file == "isvc.json" || file == "netpol.json" {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		return u
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Typed watches carry protobuf: decoded from it, the objects are laid out as in the
	// operator (every string its own allocation).
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var buf bytes.Buffer
	if err := pb.Encode(obj.(kruntime.Object), &buf); err != nil {
		t.Fatal(err)
	}
	// As the typed clients decode: without the apiVersion and kind.
	if obj, _, err = (kruntime.WithoutVersionDecoder{Decoder: pb}).Decode(buf.Bytes(), nil, nil); err != nil {
		t.Fatal(err)
	}
	return obj
}

// fillModels caches n models' objects of the given kinds through the informers' transforms
// and indexes, and returns the stores.
func fillModels(t testing.TB, n int, kinds []int) []cache.Indexer {
	t.Helper()
	var stores []cache.Indexer
	for _, k := range kinds {
		mk, transform := modelKinds[k], cachedForm(k)
		idx := cache.Indexers{}
		if mk.indexed {
			idx[byInstance] = instanceIndex
		}
		st := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, idx)
		for i := range n {
			obj, err := transform(decodeModelObject(t, mk.file, modelJSON(t, mk.file, i)))
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
		stores = append(stores, st)
	}
	return stores
}

// heapPerModel is the live heap n models' cached objects of kinds hold, per model.
func heapPerModel(t testing.TB, n int, kinds ...int) float64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stores := fillModels(t, n, kinds)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(stores)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestCachedBytesPerModel bounds what a model's cached objects cost: 18 KB typed, 6.9 KB with
// the children packed and the isvcs' common strings shared; with its NetworkPolicy, 13.9 KB
// before it was packed as JSON and the isvcs' spec.resources shared, 7.5 KB after, 7.6 KB with
// the fixtures' times, versions, hashes and addresses made to differ from model to model as in
// a cluster, and 4.6 KB once each child is kept as its differences from its informer's
// dictionary (delta.go) (issue 55; go test -v prints each kind's).
func TestCachedBytesPerModel(t *testing.T) {
	if testing.Short() {
		t.Skip("fills caches with 1,000 models")
	}
	var all []int
	for k, mk := range modelKinds {
		all = append(all, k)
		t.Logf("%s: %.0f bytes a model", mk.file, heapPerModel(t, 1000, k))
	}
	const bound = 5500
	if got := heapPerModel(t, 1000, all...); got > bound {
		t.Fatalf("a model's cached objects take %.0f bytes, over %d", got, bound)
	} else {
		t.Logf("all: %.0f bytes a model", got)
	}
}

// BenchmarkReadModel is what the packed caches add to a reconcile: decoding the model's
// Deployment, ReplicaSet, Pod, Service and HPA (the second model's: the first one's make the
// informers' dictionaries).
func BenchmarkReadModel(b *testing.B) {
	stores := fillModels(b, 2, []int{1, 2, 3, 4, 5})
	objs := make([]any, len(stores))
	for i, st := range stores {
		for _, o := range st.List() {
			if ns, inst, _ := instanceOf(o); ns+"/"+inst == "bench/m-00001" {
				objs[i] = o
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = unpack[appsv1.Deployment](objs[0])
		_, _ = unpack[appsv1.ReplicaSet](objs[1])
		_, _ = unpack[corev1.Pod](objs[2])
		_, _ = unpack[corev1.Service](objs[3])
		_, _ = unpack[autoscalingv2.HorizontalPodAutoscaler](objs[4])
	}
}

// Two models' cached isvcs share their common strings, and read the same as decoded.
func TestInferenceServicesShareStrings(t *testing.T) {
	read := func(i int) *crd.InferenceService {
		obj, err := DecodeInferenceService(decodeModelObject(t, "isvc.json", modelJSON(t, "isvc.json", i)))
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*crd.InferenceService)
	}
	a, b := read(1), read(2)
	u := decodeModelObject(t, "isvc.json", modelJSON(t, "isvc.json", 1)).(*unstructured.Unstructured)
	plain, err := crd.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	plain.TypeMeta = a.TypeMeta
	if !equality.Semantic.DeepEqual(a, plain) {
		t.Fatalf("shared strings changed the isvc:\n%+v\nwant\n%+v", a, plain)
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	ca, cb := a.Status.Conditions[2], b.Status.Conditions[2]
	if !same(a.Namespace, b.Namespace) || !same(a.Spec.Model, b.Spec.Model) || !same(ca.Message, cb.Message) || !same(ca.Reason, cb.Reason) {
		t.Fatal("common strings not shared")
	}
}
