package main

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
)

// TestContainerProberAgainstAServer runs probes against a real server on loopback: the
// kubelet's messages, thresholds, and a liveness kill reported once.
func TestContainerProberAgainstAServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	get := func(path string, failures int32) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: failures, SuccessThreshold: 1}
	}
	type report struct {
		kind string
		ok   bool
	}
	run := func(spec v1.Container) (*record.FakeRecorder, chan report, chan struct{}) {
		spec.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}
		rec := record.NewFakeRecorder(100)
		reports := make(chan report, 10)
		stop := make(chan struct{})
		cp := &containerProber{probers: newProbers(), rec: rec, ref: &v1.ObjectReference{}, spec: spec, ip: "127.0.0.1",
			startedAt: time.Now(), started: spec.StartupProbe == nil, stop: stop,
			report: func(kind string, ok bool) bool { reports <- report{kind, ok}; return true }}
		go cp.run()
		return rec, reports, stop
	}
	wait := func(reports chan report) report {
		select {
		case r := <-reports:
			return r
		case <-time.After(20 * time.Second):
			t.Fatal("no report in 20s")
		}
		return report{}
	}

	// Liveness on a missing path: two failures, then one kill.
	rec, reports, stop := run(v1.Container{Name: "server", LivenessProbe: get("/missing", 2)})
	if r := wait(reports); r != (report{probeLiveness, false}) {
		t.Fatalf("report %v, want a liveness failure", r)
	}
	close(stop)
	for i := 0; i < 2; i++ {
		if ev := <-rec.Events; ev != "Warning Unhealthy Liveness probe failed: HTTP probe failed with statuscode: 404" {
			t.Fatalf("event %q", ev)
		}
	}

	// Startup passes, then readiness times out: Client.Timeout, as the kubelet words it.
	rec, reports, stop = run(v1.Container{Name: "server", StartupProbe: get("/health", 3), ReadinessProbe: get("/slow", 1)})
	defer close(stop)
	if r := wait(reports); r != (report{probeStartup, true}) {
		t.Fatalf("report %v, want started", r)
	}
	select {
	case r := <-reports:
		t.Fatalf("report %v: readiness starts failed, a failure is no change", r)
	case ev := <-rec.Events:
		want := `Warning Unhealthy Readiness probe failed: Get "http://127.0.0.1:` + strconv.Itoa(port) + `/slow": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`
		if !strings.HasPrefix(ev, want) {
			t.Fatalf("event %q, want %q", ev, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no readiness event in 20s")
	}
}
