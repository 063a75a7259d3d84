// The fake kubelet's behaviours, chosen by image or annotation, as the operator's diagnosis reads them.

package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

type podObs struct {
	statuses map[string]bool
	ready    map[string]bool
	restarts int
}

func TestFakeKubeletBehaviors(t *testing.T) {
	ns := namespace(t)
	// The schedule model (kubelet.fake/serve: "false"): these behaviors as timed by the
	// kubelet, without probes of their own; serving_test.go covers the served ones.
	pod := func(name, image, annotation string) string {
		ann := "  annotations:\n    kubelet.fake/serve: \"false\"\n"
		if annotation != "" {
			ann += fmt.Sprintf("    kubelet.fake/behavior: %q\n", annotation)
		}
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n%sspec:\n  containers:\n  - name: app\n    image: %s\n---\n", name, ann, image)
	}
	apply(t, ns, pod("crash", "kubelet.fake/crashloop:v1", "")+
		pod("oom", "kubelet.fake/oomkilled", "")+
		pod("pull", "kubelet.fake/errimagepull:v2", "")+
		pod("never", "kubelet.fake/never-ready", "")+
		pod("slow", "kubelet.fake/slow-ready-4", "")+
		pod("annotated", "registry.example/llm-server:v1", "crashloop")+
		pod("override", "kubelet.fake/crashloop", "ready"))

	obs := map[string]*podObs{}
	satisfied := func() (bool, string) {
		out, _, err := c.Kubectl(context.Background(), "get", "pods", "-n", ns, "--no-headers")
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 {
				continue
			}
			o := obs[f[0]]
			if o == nil {
				o = &podObs{statuses: map[string]bool{}, ready: map[string]bool{}}
				obs[f[0]] = o
			}
			o.ready[f[1]] = true
			o.statuses[f[2]] = true
			var n int
			fmt.Sscan(f[3], &n)
			o.restarts = max(o.restarts, n)
		}
		var missing []string
		need := func(ok bool, what string) {
			if !ok {
				missing = append(missing, what)
			}
		}
		get := func(n string) *podObs {
			if o := obs[n]; o != nil {
				return o
			}
			return &podObs{statuses: map[string]bool{}, ready: map[string]bool{}}
		}
		need(get("crash").statuses["CrashLoopBackOff"] && get("crash").restarts >= 2, "crash: CrashLoopBackOff with restarts>=2")
		need(get("crash").statuses["Error"], "crash: Error")
		need(get("oom").statuses["OOMKilled"] && get("oom").statuses["CrashLoopBackOff"] && get("oom").restarts >= 1, "oom: OOMKilled and CrashLoopBackOff")
		need(get("pull").statuses["ErrImagePull"] && get("pull").statuses["ImagePullBackOff"], "pull: ErrImagePull and ImagePullBackOff")
		need(get("never").statuses["Running"] && get("never").ready["0/1"] && !get("never").ready["1/1"], "never: Running 0/1")
		need(get("slow").ready["0/1"] && get("slow").ready["1/1"], "slow: 0/1 then 1/1")
		need(get("annotated").statuses["CrashLoopBackOff"], "annotated: CrashLoopBackOff")
		need(get("override").ready["1/1"] && !get("override").statuses["CrashLoopBackOff"], "override: Running 1/1")
		return len(missing) == 0, fmt.Sprintf("missing %v; observed %s", missing, dump(obs))
	}
	eventually(t, 90*time.Second, satisfied)
	if s := jsonpath(t, ns, "pod/pull", "{.status.phase}"); s != "Pending" {
		t.Errorf("errimagepull phase %q", s)
	}

	// The details the operator's diagnosis reads.
	last := jsonpath(t, ns, "pod/oom", `{.status.containerStatuses[0].lastState.terminated.reason}/{.status.containerStatuses[0].lastState.terminated.exitCode}`)
	if last != "OOMKilled/137" {
		t.Errorf("oom lastState %q", last)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		w := jsonpath(t, ns, "pod/crash", `{.status.containerStatuses[0].state.waiting.reason}|{.status.containerStatuses[0].state.waiting.message}|{.status.containerStatuses[0].lastState.terminated.reason}/{.status.containerStatuses[0].lastState.terminated.exitCode}`)
		return strings.HasPrefix(w, "CrashLoopBackOff|back-off ") && strings.Contains(w, " restarting failed container=app pod=crash_"+ns+"(") && strings.HasSuffix(w, "|Error/1"), w
	})
	rc := jsonpath(t, ns, "pod/never", `{range .status.conditions[*]}{.type}={.status}/{.reason};{end}`)
	if !strings.Contains(rc, "Ready=False/ContainersNotReady") || !strings.Contains(rc, "ContainersReady=False/ContainersNotReady") {
		t.Errorf("never-ready conditions %s", rc)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		m := jsonpath(t, ns, "pod/pull", `{.status.containerStatuses[0].state.waiting.reason}: {.status.containerStatuses[0].state.waiting.message}`)
		return strings.HasPrefix(m, `ImagePullBackOff: Back-off pulling image "kubelet.fake/errimagepull:v2": ErrImagePull: `), m
	})
	ev := jsonpath(t, ns, "events", `{range .items[*]}{.involvedObject.name} {.reason} {.message}{"\n"}{end}`)
	for _, want := range []string{
		"crash BackOff Back-off restarting failed container app in pod crash_" + ns,
		`pull Failed Failed to pull image "kubelet.fake/errimagepull:v2"`,
		"pull Failed Error: ErrImagePull",
		"pull Failed Error: ImagePullBackOff",
		`pull BackOff Back-off pulling image "kubelet.fake/errimagepull:v2"`,
		"never Unhealthy Readiness probe failed: ",
		"slow Started Container started",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("missing event %q in:\n%s", want, ev)
		}
	}
}

// With a startupProbe, status.started stays false while weights load
// (slow-ready), as a real kubelet reports until the startup probe passes.
func TestStartupProbeSlowReady(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, `apiVersion: v1
kind: Pod
metadata:
  name: loader
  annotations: {kubelet.fake/serve: "false"}
spec:
  containers:
  - name: server
    image: kubelet.fake/slow-ready-5:v1
    startupProbe:
      httpGet: {path: /health, port: 8080}
      periodSeconds: 1
      failureThreshold: 600
    readinessProbe:
      httpGet: {path: /health, port: 8080}
      periodSeconds: 1
`)
	state := func() string {
		return jsonpath(t, ns, "pod/loader", `{.status.phase}/{.status.containerStatuses[0].started}/{.status.containerStatuses[0].ready}`)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		s := state()
		return s == "Running/false/false", s
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		s := state()
		return s == "Running/true/true", s
	})
	ev := jsonpath(t, ns, "events", `{range .items[?(@.reason=="Unhealthy")]}{.message}{"\n"}{end}`)
	if !strings.Contains(ev, "Startup probe failed: HTTP probe failed with statuscode: 503") {
		t.Fatalf("no startup probe failure event:\n%s", ev)
	}
}

func dump(obs map[string]*podObs) string {
	var b strings.Builder
	for n, o := range obs {
		var s, r []string
		for k := range o.statuses {
			s = append(s, k)
		}
		for k := range o.ready {
			r = append(r, k)
		}
		fmt.Fprintf(&b, "%s%v%v/%d ", n, s, r, o.restarts)
	}
	return b.String()
}
