package main

import (
	"slices"
	"testing"
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
