package main

import (
	"testing"

	"github.com/example/inferenceservice-operator/test/docs"
)

// TestFlagsTableMatchesCode: docs/operations.md's table of the activator's flags lists every
// flag the activator registers (klog's aside), and no flag it does not, each with its default.
func TestFlagsTableMatchesCode(t *testing.T) {
	documented, err := docs.FlagsDocumented("docs/operations.md", "The activator's flags")
	if err != nil {
		t.Fatal(err)
	}
	code := docs.FlagsDefined("controller/activator/cmd/main.go", func() { defineFlags(&options{}) })
	for _, e := range docs.Compare("flag", documented, code) {
		t.Error(e)
	}
	wrong, err := docs.FlagDefaults("docs/operations.md", "The activator's flags")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range wrong {
		t.Error(e)
	}
	t.Logf("%d flags registered, %d documented", len(code), len(documented))
}
