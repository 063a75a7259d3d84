package main

import (
	"testing"

	"github.com/example/inferenceservice-operator/test/docs"
)

// TestFlagsTableMatchesCode: docs/operations.md's flags table lists every flag the operator
// registers, and no flag it does not, each with its default.
func TestFlagsTableMatchesCode(t *testing.T) {
	documented, err := docs.FlagsDocumented("docs/operations.md", "Flags")
	if err != nil {
		t.Fatal(err)
	}
	code := docs.FlagsDefined("main.go", func() { defineFlags(&options{}) })
	for _, e := range docs.Compare("flag", documented, code) {
		t.Error(e)
	}
	wrong, err := docs.FlagDefaults("docs/operations.md", "Flags")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range wrong {
		t.Error(e)
	}
	t.Logf("%d flags registered, %d documented", len(code), len(documented))
}
