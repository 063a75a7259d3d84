package main

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestIPAllocatorUniqueAndResumed(t *testing.T) {
	a := newIPAllocator(42)
	// A pod resumed after a restart keeps its address; a second claim of it gets another.
	if ip := a.assign("old", "127.42.0.7"); ip != "127.42.0.7" {
		t.Fatalf("resumed pod got %s", ip)
	}
	if ip := a.assign("thief", "127.42.0.7"); ip == "127.42.0.7" {
		t.Fatalf("two pods on 127.42.0.7")
	}
	seen := map[string]types.UID{}
	for i := 0; i < 3000; i++ {
		uid := types.UID(fmt.Sprint(i))
		ip := a.assign(uid, "")
		if other, ok := seen[ip]; ok || ip == "127.42.0.7" {
			t.Fatalf("%s given to %s and %s", ip, other, uid)
		}
		seen[ip] = uid
		if again := a.assign(uid, ""); again != ip {
			t.Fatalf("pod %s: %s then %s", uid, ip, again)
		}
	}
	a.release("old")
	if ip := a.assign("new", "127.42.0.7"); ip != "127.42.0.7" {
		t.Fatalf("a released address is not reused: %s", ip)
	}
}
