package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestArgs: flags before and after the command's arguments, as kubectl users type them, and
// refusals that say what to type instead (no cluster is reached).
func TestArgs(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{[]string{}, "a command is required"},
		{[]string{"why"}, "usage: kubectl isvc why NAME"},
		{[]string{"why", "a", "b", "--kubeconfig=/nonexistent"}, "usage: kubectl isvc why NAME"},
		{[]string{"list", "-o", "yaml"}, `--output "yaml": only json is supported`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"list", "extra"}, "usage: kubectl isvc list"},
		{[]string{"list", "--kubeconfig=/nonexistent"}, "/nonexistent"},
		{[]string{"why", "qwen3", "--bogus"}, "flag provided but not defined: -bogus"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		err := run(context.Background(), c.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.wantErr)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	var o options
	fs := newFlags(&o, &bytes.Buffer{})
	pos, err := parseInterspersed(fs, []string{"why", "-n", "team-a", "qwen3", "-o", "json", "--", "-x"})
	if err != nil || strings.Join(pos, ",") != "why,qwen3,-x" || o.namespace != "team-a" || o.output != "json" {
		t.Fatalf("pos %q namespace %q output %q err %v", pos, o.namespace, o.output, err)
	}
}
