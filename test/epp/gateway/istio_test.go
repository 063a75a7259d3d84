package main

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func rule(ns, name, host string, created int, tp map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"host": host}}}
	if tp != nil {
		u.Object["spec"].(map[string]any)["trafficPolicy"] = tp
	}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetCreationTimestamp(metav1.NewTime(time.Unix(int64(created), 0)))
	return u
}

func tlsPolicy(mode string, skip bool) map[string]any {
	return map[string]any{"tls": map[string]any{"mode": mode, "insecureSkipVerify": skip}}
}

// TestUpstreamTLS: the rule Istio would apply to the picker's host, and its TLS.
func TestUpstreamTLS(t *testing.T) {
	const host = "m-epp.team.svc.cluster.local"
	for _, c := range []struct {
		name     string
		rules    []*unstructured.Unstructured
		mode     string
		skip     bool
		fromRule string
	}{
		{"no rule: plaintext", nil, "", false, ""},
		{"another host", []*unstructured.Unstructured{rule("team", "x", "other.team.svc.cluster.local", 1, tlsPolicy("SIMPLE", true))}, "", false, ""},
		{"the chart's rule", []*unstructured.Unstructured{rule("team", "m-epp", host, 1, tlsPolicy("SIMPLE", true))}, "SIMPLE", true, "team/m-epp"},
		{"a short host, in the rule's namespace", []*unstructured.Unstructured{rule("team", "s", "m-epp", 1, tlsPolicy("SIMPLE", false))}, "SIMPLE", false, "team/s"},
		{"a short host in another namespace", []*unstructured.Unstructured{rule("other", "s", "m-epp", 1, tlsPolicy("SIMPLE", true))}, "", false, ""},
		{"exact before wildcard", []*unstructured.Unstructured{
			rule("team", "w", "*.team.svc.cluster.local", 1, tlsPolicy("DISABLE", false)),
			rule("team", "e", host, 2, tlsPolicy("SIMPLE", true)),
		}, "SIMPLE", true, "team/e"},
		{"the gateway's namespace first", []*unstructured.Unstructured{
			rule("team", "a", host, 1, tlsPolicy("SIMPLE", true)),
			rule("gw", "b", host, 2, tlsPolicy("DISABLE", false)),
		}, "DISABLE", false, "gw/b"},
		{"a rule without tls", []*unstructured.Unstructured{rule("team", "m-epp", host, 1, map[string]any{})}, "", false, "team/m-epp"},
		{"the port's settings win", []*unstructured.Unstructured{rule("team", "p", host, 1, map[string]any{
			"tls":               map[string]any{"mode": "DISABLE"},
			"portLevelSettings": []any{map[string]any{"port": map[string]any{"number": int64(9002)}, "tls": map[string]any{"mode": "SIMPLE", "insecureSkipVerify": true}}},
		})}, "SIMPLE", true, "team/p"},
	} {
		mode, skip, from := upstreamTLS(c.rules, "gw", "team", host, 9002)
		if mode != c.mode || skip != c.skip || from != c.fromRule {
			t.Errorf("%s: got %q skip=%v from %q, want %q skip=%v from %q", c.name, mode, skip, from, c.mode, c.skip, c.fromRule)
		}
	}
}
