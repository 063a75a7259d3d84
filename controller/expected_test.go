package controller

import (
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/queue"
)

func TestExpectedCreates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var e expected
	k, other := queue.Key{Namespace: "ns", Name: "a"}, queue.Key{Namespace: "ns", Name: "b"}
	if _, ok := e.unmet(k, t0); ok {
		t.Fatal("unmet with nothing sent")
	}
	e.create(k, t0)
	e.create(k, t0.Add(time.Second))
	e.observed(other) // another model's child: nothing of k's
	if d, ok := e.unmet(k, t0.Add(time.Second)); !ok || d != expectTTL-time.Second {
		t.Fatalf("two creates sent: unmet %v, wait %v", ok, d)
	}
	e.observed(k)
	if _, ok := e.unmet(k, t0.Add(time.Second)); !ok {
		t.Fatal("met with one of two creates seen")
	}
	e.observed(k)
	if _, ok := e.unmet(k, t0.Add(time.Second)); ok {
		t.Fatal("unmet with both seen")
	}
	e.observed(k) // a child added by a relist: no count below zero
	e.create(k, t0)
	if _, ok := e.unmet(k, t0); !ok {
		t.Fatal("a relist's add counted against a later create")
	}
	if _, ok := e.unmet(k, t0.Add(expectTTL)); ok {
		t.Fatal("waited past expectTTL for a create never seen")
	}
	if _, ok := e.unmet(k, t0); ok {
		t.Fatal("a create given up on came back")
	}
	e.create(k, t0)
	(*memory)(&e).forget(k)
	if _, ok := e.unmet(k, t0); ok {
		t.Fatal("unmet after forget")
	}
	if len(e.keys) != 0 {
		t.Fatalf("memory kept after the last create was seen or forgotten: %+v", e.keys)
	}
}
