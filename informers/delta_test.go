package informers

import (
	"bytes"
	"math/rand/v2"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Each child's bytes, written against the dictionary of another model's, read back byte for
// byte in at most a third of their size; and so do bytes unlike the dictionary, edits of it,
// and the dictionary itself.
func TestDeltaRoundTrip(t *testing.T) {
	for k, mk := range modelKinds {
		if k == 0 {
			continue // the isvc is cached typed
		}
		b := func(i int) []byte {
			obj, err := cachedForm(k)(decodeModelObject(t, mk.file, modelJSON(t, mk.file, i)))
			if err != nil {
				t.Fatal(err)
			}
			p, ok := obj.(*packed)
			if pj, isJSON := obj.(*packedJSON); isJSON {
				p, ok = &pj.packed, true
			}
			if !ok {
				t.Fatalf("%s cached as %T", mk.file, obj)
			}
			b, err := p.bytes() // the NetworkPolicies' transform is one for the whole test
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		d := newDictionary(b(0))
		for _, i := range []int{1, 7, 999} {
			src := b(i)
			enc := d.encode(src)
			back, err := d.decode(enc)
			if err != nil || !bytes.Equal(back, src) {
				t.Fatalf("%s model %d: read back %v", mk.file, i, err)
			}
			if i == 999 {
				t.Logf("%s: %d bytes kept as %d", mk.file, len(src), len(enc))
			}
			if 3*len(enc) > len(src) {
				t.Errorf("%s model %d: %d bytes as %d", mk.file, i, len(src), len(enc))
			}
		}
	}

	r := rand.New(rand.NewPCG(1, 2))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(4)) // few symbols: many short matches
		}
		return b
	}
	for range 2000 {
		dict := randBytes(16 + r.IntN(300)) // s2 takes no dictionary under 16 bytes
		d := newDictionary(dict)
		src := randBytes(r.IntN(300))
		if len(dict) > 0 && r.IntN(2) == 0 {
			// An edit of the dictionary: a run cut out, a run put in.
			src = append(bytes.Clone(dict), src...)
			at := r.IntN(len(dict))
			src = append(src[:at], src[at+r.IntN(len(dict)-at):]...)
		}
		for _, s := range [][]byte{src, dict} {
			enc := d.encode(s)
			if back, err := d.decode(enc); err != nil || !bytes.Equal(back, s) {
				t.Fatalf("%x against %x: read back %x, %v", s, dict, back, err)
			}
			// Cut or changed, it is an error or other bytes, never a panic.
			if len(enc) > 1 {
				_, _ = d.decode(enc[:r.IntN(len(enc))])
				bad := bytes.Clone(enc)
				bad[r.IntN(len(bad))] ^= byte(1 + r.IntN(255))
				_, _ = d.decode(bad)
			}
		}
	}
	if newDictionary([]byte("abc")) != nil {
		t.Fatal("a dictionary of 3 bytes, under s2's least")
	}
	if _, err := newDictionary([]byte("sixteen bytes at least")).decode([]byte{0xff, 0xff, 0xff, 0xff, 0x07}); err == nil {
		t.Fatal("a size past maxPacked decoded")
	}
}

// A hand edit of a field the operator owns, on a model's child cached against its informer's
// dictionary, reads back from the cache as edited: the drift checks compare what was edited,
// as they did before the dictionary (TestRestoresTamperedChildren and
// TestRestoresTamperedOptionalChildren prove the restore on a cluster).
func TestEditsOfOwnedFieldsReadBack(t *testing.T) {
	edits := map[string]func(obj any){
		"deploy.json": func(obj any) {
			d := obj.(*appsv1.Deployment)
			c := &d.Spec.Template.Spec.Containers[0]
			c.Image, c.Args[0] = "evil/miner:latest", "other/model"
			c.ReadinessProbe.PeriodSeconds = 7
			d.Labels["app.kubernetes.io/managed-by"] = "Helm"
			*d.Spec.Replicas = 0
		},
		"svc.json": func(obj any) {
			s := obj.(*corev1.Service)
			s.Spec.Ports[0].Port, s.Spec.Ports[0].TargetPort = 9000, intstr.FromInt32(9000)
			s.Spec.Selector = map[string]string{"app": "other"}
		},
		"hpa.json": func(obj any) {
			h := obj.(*autoscalingv2.HorizontalPodAutoscaler)
			h.Spec.MaxReplicas = 30
			h.Spec.Metrics[0].Pods.Target.AverageValue.Set(50)
		},
		"netpol.json": func(obj any) {
			u := obj.(*unstructured.Unstructured)
			if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{}}, "spec", "ingress"); err != nil {
				t.Fatal(err)
			}
		},
	}
	for k, mk := range modelKinds {
		edit, ok := edits[mk.file]
		if !ok {
			continue
		}
		transform := cachedForm(k) // one informer: model 0 makes its dictionary
		read := func(i int, edit func(any)) (stripped, cached any) {
			obj := decodeModelObject(t, mk.file, modelJSON(t, mk.file, i))
			if edit != nil {
				edit(obj)
			}
			again := decodeModelObject(t, mk.file, modelJSON(t, mk.file, i))
			if edit != nil {
				edit(again)
			}
			stripped, err := modelKinds[k].strip(again)
			if err != nil {
				t.Fatal(err)
			}
			c, err := transform(obj)
			if err != nil {
				t.Fatal(err)
			}
			switch mk.file {
			case "deploy.json":
				cached, err = unpack[appsv1.Deployment](c)
			case "svc.json":
				cached, err = unpack[corev1.Service](c)
			case "hpa.json":
				cached, err = unpack[autoscalingv2.HorizontalPodAutoscaler](c)
			default:
				cached, err = unpackJSON(c)
				stripped, _ = StripManagedFields(again)
			}
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := c.(*packed); ok && p.dict == nil && i != 0 {
				t.Fatalf("%s model %d not kept against the dictionary", mk.file, i)
			}
			if p, ok := c.(*packedJSON); ok && p.dict == nil && i != 0 {
				t.Fatalf("%s model %d not kept against the dictionary", mk.file, i)
			}
			return stripped, cached
		}
		read(0, nil)
		_, plain := read(3, nil)
		want, edited := read(3, edit)
		if !equality.Semantic.DeepEqual(edited, want) {
			t.Fatalf("%s edited reads back\n%+v\nwant\n%+v", mk.file, edited, want)
		}
		if equality.Semantic.DeepEqual(edited, plain) {
			t.Fatalf("%s: the edit is lost in the cache", mk.file)
		}
	}
}

// The first pod an informer packs is pending: the running pods after it, unlike it, remake the
// dictionary and are then kept in a fraction of their size; objects of two shapes in turn make
// at most maxDictionaries.
func TestDictionaryRemadeForUnlikeObjects(t *testing.T) {
	transform := cachedForm(3)
	if modelKinds[3].file != "pod.json" {
		t.Fatal("modelKinds[3] is not the pod")
	}
	pod := func(i int, pending bool) *packed {
		p := decodeModelObject(t, "pod.json", modelJSON(t, "pod.json", i)).(*corev1.Pod)
		if pending {
			p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
		}
		obj, err := transform(p)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*packed)
	}
	first := pod(0, true)
	if first.dict != nil {
		t.Fatal("the first pod kept against a dictionary")
	}
	if pod(1, false).dict != nil {
		t.Fatal("a running pod kept against the pending pod's dictionary")
	}
	p := pod(2, false)
	b, err := p.bytes()
	if err != nil || p.dict == nil || 3*len(p.raw) > len(b) {
		t.Fatalf("the next running pod kept in %d bytes of %d (%v)", len(p.raw), len(b), err)
	}
	dicts := map[*dictionary]bool{}
	for i := range 40 {
		p := pod(3+i, i%2 == 0)
		if p.dict != nil {
			dicts[p.dict] = true
		}
		if _, err := unpack[corev1.Pod](p); err != nil {
			t.Fatal(err)
		}
	}
	if len(dicts) > maxDictionaries {
		t.Fatalf("%d dictionaries", len(dicts))
	}
}

// What is kept is its length: not the room it grew in (the first run of 2,000 models after
// the dictionary held about as much room as bytes).
func TestDeltaKeptWithoutRoom(t *testing.T) {
	for k, mk := range modelKinds {
		if !mk.packed {
			continue
		}
		transform := cachedForm(k)
		for i := range 3 {
			obj, err := transform(decodeModelObject(t, mk.file, modelJSON(t, mk.file, i)))
			if err != nil {
				t.Fatal(err)
			}
			if p := obj.(*packed); p.dict != nil && cap(p.raw) != len(p.raw) {
				t.Fatalf("%s model %d: %d bytes kept in %d", mk.file, i, len(p.raw), cap(p.raw))
			}
		}
	}
}
