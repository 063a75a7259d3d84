package controller

import (
	"errors"
	"reflect"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

// One forget drops what every view remembered of a key, and nothing of another's.
func TestMemoryForgetsAKeyWhole(t *testing.T) {
	var m memory
	k, other := queue.Key{Namespace: "ns", Name: "a"}, queue.Key{Namespace: "ns", Name: "b"}
	isvc := &crd.InferenceService{}
	isvc.UID, isvc.Generation = "u", 1
	remember := func(k queue.Key) {
		m.holds().since(k, isvc, t0)
		m.echoes().record(k, "u", "7", &crd.InferenceServiceStatus{}, nil, t0)
		m.expected().create(k, t0)
		m.attempts().record(k, reconcile.AdapterStep{Pod: "p", Name: "sql", Load: true}, t0, errors.New("boom"))
		m.servedSets().observe(k, map[string]string{"p": "p-uid/0"})
		a := reconcile.Action{Kind: "Service", Object: ownedService(k)}
		m.namesakes().add(a)
		if !m.namesakes().seen(a) {
			t.Fatal("namesake not remembered")
		}
	}
	remember(k)
	remember(other)
	if r := m.keys[k]; r == nil || r.empty() {
		t.Fatalf("nothing remembered of %v: %+v", k, r)
	}
	m.forget(k)
	if _, ok := m.keys[k]; ok {
		t.Fatalf("%v remembered after forget", k)
	}
	if _, ok := m.expected().unmet(k, t0); ok || m.attempts().has(k) || m.namesakes().seen(reconcile.Action{Kind: "Service", Object: ownedService(k)}) {
		t.Fatal("a view still answers for a forgotten key")
	}
	if r := m.keys[other]; r == nil || r.hold == nil || r.echo == nil || r.expect == nil || len(r.attempts) != 1 || len(r.namesakes) != 1 || len(r.served) != 1 || m.attemptsHeld != 1 {
		t.Fatalf("the other key's memory was touched: %+v (attempts held %d)", r, m.attemptsHeld)
	}
}

// A key whose every part lapsed is dropped: the memory does not grow with the models at rest.
func TestMemoryTidiesLapsedKeys(t *testing.T) {
	var m memory
	k := queue.Key{Namespace: "ns", Name: "a"}
	isvc := &crd.InferenceService{}
	m.holds().since(k, isvc, t0)
	m.holds().release(k)
	m.expected().create(k, t0)
	m.expected().observed(k)
	m.echoes().record(k, "u", "7", &crd.InferenceServiceStatus{}, nil, t0)
	isvc.UID, isvc.ResourceVersion = "u", "7" // the cache shows the write
	m.echoes().pending(k, isvc, &crd.InferenceServiceStatus{}, nil, false, t0)
	m.attempts().record(k, reconcile.AdapterStep{Pod: "p", Name: "sql", Load: true}, t0, nil)
	m.attempts().settle(k, nil) // the pod no longer serves
	m.servedSets().observe(k, map[string]string{"p": "p-uid/0"})
	m.servedSets().observe(k, nil) // nor here
	a := reconcile.Action{Kind: "Service", Object: ownedService(k)}
	m.namesakes().add(a)
	m.namesakes().forget(a)
	if len(m.keys) != 0 || m.attemptsHeld != 0 {
		t.Fatalf("kept: %+v (attempts held %d)", m.keys, m.attemptsHeld)
	}
}

// empty looks at every field of remembered: a part added later and left out of it would keep
// keys forever, or drop one that still remembers something.
func TestRememberedEmptySeesEveryField(t *testing.T) {
	typ := reflect.TypeOf(remembered{})
	for i := range typ.NumField() {
		var r remembered
		f := reflect.ValueOf(&r).Elem().Field(i)
		f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem() // settable, though unexported
		switch f.Kind() {
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem())
		default:
			t.Fatalf("remembered.%s is a %s: give empty a way to see it", typ.Field(i).Name, f.Kind())
		}
		if r.empty() {
			t.Errorf("remembered.%s set, yet empty() says nothing is remembered", typ.Field(i).Name)
		}
	}
}

// ownedService is a Service of k's isvc, controlled by it.
func ownedService(k queue.Key) *corev1.Service {
	meta := owned(k.Name, k.Name)
	meta.Namespace = k.Namespace
	return &corev1.Service{ObjectMeta: meta}
}

// A rollout is decided from this replica's own last status write while the cache is behind it:
// a cache still showing step 1 running after the rollback was written would judge the step
// again. Once the cache shows the write, or it lapses, the cache's rollout stands.
func TestRolloutReadFromOwnWriteWhileTheCacheIsBehind(t *testing.T) {
	var m memory
	k := queue.Key{Namespace: "ns", Name: "a"}
	isvc := &crd.InferenceService{}
	isvc.UID, isvc.ResourceVersion = "u", "6" // the cache: before the write
	back := &crd.RolloutStatus{Phase: crd.RolloutRolledBack, Step: 1, FailedRevision: "new"}
	m.echoes().record(k, "u", "7", &crd.InferenceServiceStatus{}, &crd.StatusExtensions{Rollout: back}, t0)
	if got, ok := m.echoes().rollout(k, isvc, t0.Add(time.Second)); !ok || got == nil || *got != *back {
		t.Fatalf("behind the write: %+v %v, want the written %+v", got, ok, back)
	}
	if _, ok := m.echoes().rollout(k, isvc, t0.Add(echoWait)); ok {
		t.Fatal("the write still trusted after echoWait")
	}
	isvc.ResourceVersion = "7"
	if _, ok := m.echoes().rollout(k, isvc, t0.Add(time.Second)); ok {
		t.Fatal("the write read over a cache that shows it")
	}
	other := isvc.DeepCopy()
	other.UID, other.ResourceVersion = "v", "6" // a namesake made anew
	if _, ok := m.echoes().rollout(k, other, t0.Add(time.Second)); ok {
		t.Fatal("another object's write read")
	}
}

// A status write the cache has shown is forgotten when the next pass weighs the status, even
// when there is nothing to write: a model at rest keeps no copy of its status.
func TestEchoForgottenOnceTheCacheShowsIt(t *testing.T) {
	var m memory
	k := queue.Key{Namespace: "ns", Name: "a"}
	isvc := &crd.InferenceService{}
	isvc.UID, isvc.ResourceVersion = "u", "6"
	m.echoes().record(k, "u", "7", &crd.InferenceServiceStatus{}, &crd.StatusExtensions{}, t0)
	m.echoes().settle(k, isvc, t0.Add(time.Second))
	if r := m.keys[k]; r == nil || r.echo == nil {
		t.Fatal("forgotten while the cache is behind it")
	}
	isvc.ResourceVersion = "7"
	m.echoes().settle(k, isvc, t0.Add(time.Second))
	if len(m.keys) != 0 {
		t.Fatalf("kept at rest: %+v", m.keys[k])
	}
}
