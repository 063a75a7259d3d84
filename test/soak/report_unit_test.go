package soak

import (
	"testing"
	"time"

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

// A repeated status write is traced: replica, order, answer and the fields each write changed.
func TestWriteTrail(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	path := "/apis/ai.example.com/v1alpha1/namespaces/a/inferenceservices/m/status"
	body := func(msg string) []byte {
		return []byte(`{"status":{"phase":"Ready","conditions":[{"type":"Ready","status":"True","message":"` + msg + `"}]}}`)
	}
	ws := []sentWrite{
		{"b", testenv.Request{At: t0.Add(2 * time.Second), Method: "PUT", Path: path, Code: 200, Body: body("two")}},
		{"a", testenv.Request{At: t0, Method: "PUT", Path: path, Code: 409, Body: body("one")}},
		{"a", testenv.Request{At: t0.Add(time.Second), Method: "PUT", Path: path, Code: 200, Body: body("one")}},
		{"a", testenv.Request{At: t0, Method: "POST", Path: "/api/v1/namespaces/a/events", Code: 201}},
	}
	got := writeTrail(ws, 4)
	want := "  " + path + ":\n" +
		"    +  0.0s replica a PUT 409 (the first in the window)\n" +
		"    +  1.0s replica a PUT 200 changed nothing from the previous body\n" +
		"    +  2.0s replica b PUT 200 changed status.conditions[Ready].message: \"one\" -> \"two\"\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
