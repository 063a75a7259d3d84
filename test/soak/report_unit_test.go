package soak

import (
	"testing"

	"github.com/example/inferenceservice-operator/test/testenv"
)

// The writes at rest are named, the most frequent first, at most max of them.
func TestWriteSummary(t *testing.T) {
	put := testenv.Request{Method: "PUT", Path: "/apis/ai.example.com/v1alpha1/namespaces/a/inferenceservices/m/status", Code: 200}
	event := testenv.Request{Method: "POST", Path: "/api/v1/namespaces/a/events", Code: 201}
	patch := testenv.Request{Method: "PATCH", Path: "/apis/apps/v1/namespaces/a/deployments/m", Code: 409}
	got := writeSummary([]testenv.Request{event, put, put, patch, put, event}, 2)
	want := "  3x PUT /apis/ai.example.com/v1alpha1/namespaces/a/inferenceservices/m/status 200\n" +
		"  2x POST /api/v1/namespaces/a/events 201\n" +
		"  ... and 1 more\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := writeSummary(nil, 8); got != "" {
		t.Errorf("no writes: %q", got)
	}
}
