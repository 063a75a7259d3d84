package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// One cluster shared by every test in the package; each test uses its own
// namespace.
var c *cluster.Cluster

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	start := time.Now()
	var err error
	c, err = cluster.Start(ctx, cluster.Options{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting localcluster: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "localcluster ready in %v at %s (data %s)\n", time.Since(start).Round(time.Millisecond), c.Server(), c.DataDir())
	code := m.Run()
	if code != 0 {
		if b, err := os.ReadFile(filepath.Join(c.DataDir(), "localcluster.log")); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			fmt.Fprintf(os.Stderr, "---- last lines of localcluster.log ----\n%s\n", strings.Join(lines, "\n"))
		}
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping localcluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// ---- helpers ----

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, _, err := c.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

func apply(t *testing.T, ns, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-n", ns, "-f", f)
}

// namespace creates a fresh namespace, deleted (without waiting) after the test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(ns) > 50 {
		ns = ns[:50]
	}
	ns = strings.Trim(ns, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.Kubectl(ctx, "delete", "namespace", ns, "--wait=false")
	})
	// The ServiceAccount admission plugin rejects pods until the
	// serviceaccount controller has created "default".
	eventually(t, 30*time.Second, func() (bool, string) {
		out, _, err := c.Kubectl(context.Background(), "get", "serviceaccount", "default", "-n", ns, "-o", "name")
		return err == nil && strings.TrimSpace(out) != "", "default ServiceAccount in " + ns
	})
	return ns
}

// eventually polls cond every 250ms until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			if ok, msg = cond(); ok {
				return
			}
			t.Fatalf("condition not met after %v: %s", timeout, msg)
		case <-tick.C:
		}
	}
}

func jsonpath(t *testing.T, ns, obj, path string) string {
	t.Helper()
	out, _, err := c.Kubectl(context.Background(), "get", "-n", ns, obj, "-o", "jsonpath="+path)
	if err != nil {
		return ""
	}
	return out
}

func deployment(name string, replicas int, image string, resources string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: %[2]d
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: server
        image: %[3]s
%[4]s`, name, replicas, image, resources)
}

// ---- tests ----

func TestServerVersion(t *testing.T) {
	out := kubectl(t, "version", "-o", "json")
	var v struct {
		ServerVersion struct{ GitVersion, Major, Minor string }
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if v.ServerVersion.GitVersion != "v1.37.2" || v.ServerVersion.Major != "1" || v.ServerVersion.Minor != "37" {
		t.Fatalf("server version %+v", v.ServerVersion)
	}
	nodes := kubectl(t, "get", "nodes", "--no-headers")
	if n := len(strings.Split(strings.TrimSpace(nodes), "\n")); n != 4 || strings.Count(nodes, " Ready ") != 4 {
		t.Fatalf("want 4 Ready nodes:\n%s", nodes)
	}
	if gpu := jsonpath(t, "", "node/fake-node-0", `{.status.allocatable.nvidia\.com/gpu}`); gpu != "8" {
		t.Fatalf("node gpus = %q", gpu)
	}
}

func TestGPUDeploymentBecomesReady(t *testing.T) {
	ns := namespace(t)
	start := time.Now()
	apply(t, ns, deployment("llm", 3, "registry.example/llm-server:v1", `        resources:
          requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: 1}
          limits: {nvidia.com/gpu: 1}
`))
	eventually(t, 60*time.Second, func() (bool, string) {
		r := jsonpath(t, ns, "deployment/llm", "{.status.readyReplicas}")
		return r == "3", "readyReplicas=" + r
	})
	t.Logf("deployment 3/3 Ready %v after apply", time.Since(start).Round(time.Millisecond))
	out := kubectl(t, "get", "deployment", "llm", "-n", ns, "--no-headers")
	if !strings.Contains(out, "3/3") {
		t.Fatalf("kubectl get deployment: %s", out)
	}
	pods := kubectl(t, "get", "pods", "-n", ns, "-o", "wide", "--no-headers")
	for _, line := range strings.Split(strings.TrimSpace(pods), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[1] != "1/1" || f[2] != "Running" || !strings.HasPrefix(f[5], "127.") || !strings.HasPrefix(f[6], "fake-node-") {
			t.Fatalf("unexpected pod line %q", line)
		}
	}
	conds := jsonpath(t, ns, "pods", `{range .items[*]}{range .status.conditions[*]};{.type}={.status}{end}{"\n"}{end}`)
	for _, want := range []string{";PodScheduled=True", ";Initialized=True", ";ContainersReady=True", ";Ready=True", ";PodReadyToStartContainers=True"} {
		if strings.Count(conds, want) != 3 {
			t.Fatalf("want %s on 3 pods:\n%s", want, conds)
		}
	}
	ev := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=Pod", "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
	for _, want := range []string{"Scheduled", "Pulled", "Created", "Started"} {
		if !strings.Contains(ev, want) {
			t.Fatalf("no %s event:\n%s", want, ev)
		}
	}
}

func TestPodAskingTooManyGPUsStaysPending(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, `apiVersion: v1
kind: Pod
metadata:
  name: huge
spec:
  containers:
  - name: server
    image: registry.example/llm-server:v1
    resources:
      limits: {nvidia.com/gpu: 16}
`)
	eventually(t, 60*time.Second, func() (bool, string) {
		ev := jsonpath(t, ns, "events", `{range .items[?(@.reason=="FailedScheduling")]}{.message}{"\n"}{end}`)
		return strings.Contains(ev, "Insufficient nvidia.com/gpu"), "FailedScheduling events: " + ev
	})
	if phase := jsonpath(t, ns, "pod/huge", "{.status.phase}"); phase != "Pending" {
		t.Fatalf("phase %q", phase)
	}
	if node := jsonpath(t, ns, "pod/huge", "{.spec.nodeName}"); node != "" {
		t.Fatalf("scheduled to %q", node)
	}
}

func TestResourceQuotaAndLimitRange(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, `apiVersion: v1
kind: LimitRange
metadata:
  name: defaults
spec:
  limits:
  - type: Container
    defaultRequest: {cpu: 500m, memory: 256Mi}
    default: {cpu: "1", memory: 512Mi}
---
apiVersion: v1
kind: ResourceQuota
metadata:
  name: small
spec:
  hard:
    requests.cpu: "1"
    requests.memory: 1Gi
`)
	// The quota controller must have computed status.hard before the
	// admission plugin enforces it.
	eventually(t, 30*time.Second, func() (bool, string) {
		h := jsonpath(t, ns, "resourcequota/small", `{.status.hard.requests\.cpu}`)
		return h == "1", "quota status.hard=" + h
	})
	apply(t, ns, deployment("big", 3, "registry.example/llm-server:v1", ""))
	eventually(t, 60*time.Second, func() (bool, string) {
		ev := jsonpath(t, ns, "events", `{range .items[?(@.reason=="FailedCreate")]}{.involvedObject.kind}: {.message}{"\n"}{end}`)
		return strings.Contains(ev, "ReplicaSet: ") && strings.Contains(ev, "exceeded quota"), "FailedCreate events: " + ev
	})
	eventually(t, 60*time.Second, func() (bool, string) {
		cond := jsonpath(t, ns, "replicasets", `{range .items[*].status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}`)
		return strings.Contains(cond, "ReplicaFailure=True FailedCreate") && strings.Contains(cond, "exceeded quota"), "ReplicaSet conditions: " + cond
	})
	eventually(t, 60*time.Second, func() (bool, string) {
		r := jsonpath(t, ns, "deployment/big", "{.status.readyReplicas}")
		return r == "2", "readyReplicas=" + r
	})
	req := jsonpath(t, ns, "pods", `{range .items[*]}{.spec.containers[0].resources.requests.cpu}/{.spec.containers[0].resources.requests.memory}{"\n"}{end}`)
	if strings.Count(req, "500m/256Mi") != 2 {
		t.Fatalf("LimitRange defaults not applied: %q", req)
	}
	dcond := jsonpath(t, ns, "deployment/big", `{range .status.conditions[*]}{.type}={.status};{end}`)
	if !strings.Contains(dcond, "ReplicaFailure=True") {
		t.Fatalf("deployment conditions: %s", dcond)
	}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.localcluster.io
spec:
  group: test.localcluster.io
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Model, type: string, jsonPath: .spec.model}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [model]
            properties:
              replicas: {type: integer, minimum: 0, maximum: 10}
              model: {type: string, minLength: 1}
          status:
            type: object
            properties:
              phase: {type: string}
`

func TestCRDPrinterColumnsEditAndValidation(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, widgetCRD)
	eventually(t, 30*time.Second, func() (bool, string) {
		s := jsonpath(t, "", "crd/widgets.test.localcluster.io", `{.status.conditions[?(@.type=="Established")].status}`)
		return s == "True", "Established=" + s
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		_, _, err := c.Kubectl(context.Background(), "get", "widgets", "-n", ns)
		return err == nil, fmt.Sprint(err)
	})
	apply(t, ns, `apiVersion: test.localcluster.io/v1
kind: Widget
metadata:
  name: w1
spec:
  replicas: 1
  model: llama
`)
	kubectl(t, "patch", "widget", "w1", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Serving"}}`)
	out := kubectl(t, "get", "widgets", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME REPLICAS MODEL PHASE AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "w1 1 llama Serving ") {
		t.Fatalf("kubectl get widgets:\n%s", out)
	}

	editor := func(expr string) []string {
		script := filepath.Join(t.TempDir(), "editor.sh")
		body := fmt.Sprintf("#!/bin/sh\nsed -i -e '%s' \"$1\"\n", expr)
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return []string{"EDITOR=" + script, "KUBE_EDITOR=" + script}
	}
	ctx := context.Background()
	if _, stderr, err := c.KubectlEnv(ctx, editor("s/replicas: 1$/replicas: 3/"), "edit", "widget", "w1", "-n", ns); err != nil {
		t.Fatalf("edit: %v %s", err, stderr)
	}
	if r := jsonpath(t, ns, "widget/w1", "{.spec.replicas}"); r != "3" {
		t.Fatalf("after edit replicas=%q", r)
	}
	_, stderr, err := c.KubectlEnv(ctx, editor("s/replicas: 3$/replicas: 50/"), "edit", "widget", "w1", "-n", ns)
	if err == nil {
		t.Fatalf("an edit violating the schema was accepted")
	}
	if !strings.Contains(stderr, `widgets.test.localcluster.io "w1" is invalid`) {
		t.Fatalf("unexpected edit error: %s", stderr)
	}
	// kubectl keeps the refused copy, with the server's reasons as comments.
	_, rest, _ := strings.Cut(stderr, "stored to \"")
	copyPath, _, _ := strings.Cut(rest, "\"")
	saved, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatalf("refused copy: %v (stderr %s)", err, stderr)
	}
	if !strings.Contains(string(saved), "spec.replicas: Invalid value: 50: spec.replicas in body should be less than or equal to 10") {
		t.Fatalf("refused copy lacks the validation error:\n%s", saved)
	}
	if r := jsonpath(t, ns, "widget/w1", "{.spec.replicas}"); r != "3" {
		t.Fatalf("refused edit changed replicas to %q", r)
	}
	// The status subresource: a main-resource update cannot change status.
	kubectl(t, "patch", "widget", "w1", "-n", ns, "--type=merge", "-p", `{"status":{"phase":"Hacked"}}`)
	if p := jsonpath(t, ns, "widget/w1", "{.status.phase}"); p != "Serving" {
		t.Fatalf("status changed through the main resource: %q", p)
	}
}

func TestDeleteDeploymentCascades(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, deployment("gc", 2, "registry.example/llm-server:v1", ""))
	eventually(t, 60*time.Second, func() (bool, string) {
		r := jsonpath(t, ns, "deployment/gc", "{.status.readyReplicas}")
		return r == "2", "readyReplicas=" + r
	})
	if rs := jsonpath(t, ns, "replicasets", "{.items[*].metadata.name}"); rs == "" {
		t.Fatal("no ReplicaSet")
	}
	kubectl(t, "delete", "deployment", "gc", "-n", ns, "--wait=false")
	eventually(t, 60*time.Second, func() (bool, string) {
		rs := jsonpath(t, ns, "replicasets", "{.items[*].metadata.name}")
		pods := jsonpath(t, ns, "pods", "{.items[*].metadata.name}")
		return rs == "" && pods == "", fmt.Sprintf("replicasets=%q pods=%q", rs, pods)
	})
}

type podObs struct {
	statuses map[string]bool
	ready    map[string]bool
	restarts int
}

func TestFakeKubeletBehaviors(t *testing.T) {
	ns := namespace(t)
	pod := func(name, image, annotation string) string {
		ann := ""
		if annotation != "" {
			ann = fmt.Sprintf("  annotations:\n    kubelet.fake/behavior: %q\n", annotation)
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

func TestHPAReportsMissingMetrics(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, deployment("web", 1, "registry.example/llm-server:v1", `        resources:
          requests: {cpu: 500m}
`)+`---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 50}
`)
	eventually(t, 90*time.Second, func() (bool, string) {
		cond := jsonpath(t, ns, "hpa/web", `{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}`)
		return strings.Contains(cond, "ScalingActive=False FailedGetResourceMetric") && strings.Contains(cond, "unable to get metrics"), "conditions: " + cond
	})
}

func TestServiceAccountKubeconfigAndRBAC(t *testing.T) {
	ns := namespace(t)
	kubectl(t, "create", "serviceaccount", "reader", "-n", ns)
	kubectl(t, "create", "rolebinding", "reader-view", "-n", ns, "--clusterrole=view", "--serviceaccount="+ns+":reader")
	kc, err := c.ServiceAccountKubeconfig(context.Background(), ns, "reader")
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, "--kubeconfig="+kc, "get", "pods", "-n", ns)
	if out, _, _ := c.Kubectl(context.Background(), "--kubeconfig="+kc, "auth", "can-i", "create", "deployments", "-n", ns); strings.TrimSpace(out) != "no" {
		t.Fatalf("can-i create deployments = %q", out)
	}
	if out := kubectl(t, "--kubeconfig="+kc, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); out != "system:serviceaccount:"+ns+":reader" {
		t.Fatalf("whoami = %q", out)
	}
}

// Runs last: it restarts the shared cluster.
func TestZZRestartKeepsObjects(t *testing.T) {
	ns := namespace(t)
	kubectl(t, "create", "configmap", "keep", "-n", ns, "--from-literal=k=v")
	kubectl(t, "create", "serviceaccount", "bot", "-n", ns)
	kubectl(t, "create", "rolebinding", "bot-view", "-n", ns, "--clusterrole=view", "--serviceaccount="+ns+":bot")
	apply(t, ns, deployment("survivor", 2, "registry.example/llm-server:v1", ""))
	eventually(t, 60*time.Second, func() (bool, string) {
		r := jsonpath(t, ns, "deployment/survivor", "{.status.readyReplicas}")
		return r == "2", "readyReplicas=" + r
	})
	kc, err := c.ServiceAccountKubeconfig(context.Background(), ns, "bot")
	if err != nil {
		t.Fatal(err)
	}
	server := c.Server()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %v", time.Since(start).Round(time.Millisecond))
	if c.Server() != server {
		t.Fatalf("server moved from %s to %s", server, c.Server())
	}
	if v := jsonpath(t, ns, "configmap/keep", "{.data.k}"); v != "v" {
		t.Fatalf("configmap after restart: %q", v)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		r := jsonpath(t, ns, "deployment/survivor", "{.status.readyReplicas}")
		return r == "2", "readyReplicas=" + r
	})
	// A token issued before the restart is still accepted.
	kubectl(t, "--kubeconfig="+kc, "get", "configmap", "keep", "-n", ns)
}
