package main

import (
	"testing"

	"github.com/example/inferenceservice-operator/metrics/custommetrics"
)

func TestBackendOf(t *testing.T) {
	got, err := backendOf("inferenceservice-system/inferenceservice-metrics-adapter", 443)
	if err != nil || got != (custommetrics.Backend{Namespace: "inferenceservice-system", Name: "inferenceservice-metrics-adapter", Port: 443}) {
		t.Fatalf("backendOf = %+v, %v", got, err)
	}
	for _, bad := range []struct {
		service string
		port    int32
	}{{"adapter", 443}, {"/adapter", 443}, {"ns/", 443}, {"ns/a/b", 443}, {"ns/adapter", 0}, {"ns/adapter", 70000}} {
		if _, err := backendOf(bad.service, bad.port); err == nil {
			t.Errorf("backendOf(%q, %d) accepted", bad.service, bad.port)
		}
	}
}
