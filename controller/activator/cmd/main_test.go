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
