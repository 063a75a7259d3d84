package purity

import (
	"strings"
	"testing"
)

func TestViolationsFound(t *testing.T) {
	got, err := Violations("testdata/impure")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"imports context", "reads the clock (time.Now)"}
	if len(got) != len(want) {
		t.Fatalf("violations %q, want %d: %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) || !strings.Contains(got[i], "impure.go:") {
			t.Errorf("violation %d %q, want one in impure.go with %q", i, got[i], w)
		}
	}
}

func TestPure(t *testing.T) { Check(t, nil) }
