package main

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/example/inferenceservice-operator/controller/process/endpoints"
)

func TestNamespaceList(t *testing.T) {
	for in, want := range map[string][]string{
		"":                {""},
		" , ":             {""},
		"team-a":          {"team-a"},
		"team-a, team-b,": {"team-a", "team-b"},
	} {
		if got := namespaceList(in); !slices.Equal(got, want) {
			t.Errorf("namespaceList(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		":8080":          ":8080",
		"10.0.0.7:8080":  "10.0.0.7:8080",
		"fd00::1:8080":   "[fd00::1]:8080",
		"[fd00::1]:8080": "[fd00::1]:8080",
		"localhost:8080": "localhost:8080",
		"not-an-address": "not-an-address",
	} {
		if got := listenAddr(in); got != want {
			t.Errorf("listenAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReadiness: not ready before the informers synced, ready after, and not ready again from
// SIGTERM on, whatever the informers say.
func TestReadiness(t *testing.T) {
	var synced, terminating atomic.Bool
	ready := readiness(&synced, &terminating)
	if err := ready(); !errors.Is(err, endpoints.ErrNotSynced) {
		t.Fatalf("before sync: %v", err)
	}
	synced.Store(true)
	if err := ready(); err != nil {
		t.Fatalf("synced: %v", err)
	}
	terminating.Store(true)
	if err := ready(); !errors.Is(err, errShuttingDown) {
		t.Fatalf("after SIGTERM: %v", err)
	}
}
