// Workloads behave as on a real cluster: GPU scheduling, quota and LimitRange, garbage collection, the HPA.

package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

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
