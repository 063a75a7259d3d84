package main

import (
	"testing"
)

func TestBackendOf(t *testing.T) {
	for _, tc := range []struct {
		service, podNamespace string
		wantNS, wantName      string
	}{
		// The default: the adapter's own Service in the namespace it was installed in.
		{"", "my-ns", "my-ns", "inferenceservice-metrics-adapter"},
		{"", "inferenceservice-system", "inferenceservice-system", "inferenceservice-metrics-adapter"},
		// Named explicitly: that Service, wherever the pod runs.
		{"other/adapter", "my-ns", "other", "adapter"},
	} {
		got, err := backendOf(tc.service, tc.podNamespace, 443)
		if err != nil || got.Namespace != tc.wantNS || got.Name != tc.wantName || got.Port != 443 {
			t.Errorf("backendOf(%q, %q) = %+v, %v; want %s/%s", tc.service, tc.podNamespace, got, err, tc.wantNS, tc.wantName)
		}
	}
	for _, bad := range []struct {
		service, podNamespace string
		port                  int32
	}{{"adapter", "", 443}, {"/adapter", "", 443}, {"ns/", "", 443}, {"ns/a/b", "", 443}, {"ns/adapter", "", 0}, {"ns/adapter", "", 70000},
		// No flag and no downward API: no guess at a namespace.
		{"", "", 443}} {
		if _, err := backendOf(bad.service, bad.podNamespace, bad.port); err == nil {
			t.Errorf("backendOf(%q, %q, %d) accepted", bad.service, bad.podNamespace, bad.port)
		}
	}
}
