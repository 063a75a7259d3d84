// LeaderWorkerSet on the local cluster: its controller manager (test/lws, started by
// operator.StartLWS) places multi-node groups on the fake nodes and recreates a group that lost
// a pod.

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/operator"
)

// lwsGroups is 2 groups of 2 pods, each pod asking for a whole 8-GPU node: the 4 nodes of the
// default cluster hold exactly the 2 groups.
const lwsGroups = `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: big
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
        - name: leader
          image: kubelet.fake/ready
          resources:
            limits: {nvidia.com/gpu: 8}
    workerTemplate:
      spec:
        containers:
        - name: worker
          image: kubelet.fake/ready
          resources:
            limits: {nvidia.com/gpu: 8}
`

// lwsPod is what the test reads of one pod of the LeaderWorkerSet.
type lwsPod struct {
	Name, UID, Node, Group, Worker, LeaderAddress string
	Ready, Deleting                               bool
}

// lwsPods lists the pods of the LeaderWorkerSet name, sorted by name.
func lwsPods(t *testing.T, ns, name string) []lwsPod {
	t.Helper()
	out, _, err := c.Kubectl(context.Background(), "get", "pods", "-n", ns, "-l", operator.LWSNameLabel+"="+name, "-o", "json")
	if err != nil {
		return nil
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name, UID         string
				Labels            map[string]string
				DeletionTimestamp *string
			}
			Spec struct {
				NodeName   string
				Containers []struct {
					Env []struct{ Name, Value string }
				}
			}
			Status struct {
				Conditions []struct{ Type, Status string }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var pods []lwsPod
	for _, it := range list.Items {
		p := lwsPod{
			Name: it.Metadata.Name, UID: it.Metadata.UID, Node: it.Spec.NodeName,
			Group:    it.Metadata.Labels["leaderworkerset.sigs.k8s.io/group-index"],
			Worker:   it.Metadata.Labels["leaderworkerset.sigs.k8s.io/worker-index"],
			Deleting: it.Metadata.DeletionTimestamp != nil,
		}
		for _, cond := range it.Status.Conditions {
			if cond.Type == "Ready" {
				p.Ready = cond.Status == "True"
			}
		}
		for _, ctr := range it.Spec.Containers {
			for _, e := range ctr.Env {
				if e.Name == "LWS_LEADER_ADDRESS" {
					p.LeaderAddress = e.Value
				}
			}
		}
		pods = append(pods, p)
	}
	slices.SortFunc(pods, func(a, b lwsPod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// allReady reports whether want pods exist, none terminating, all Ready.
func allReady(pods []lwsPod, want int) bool {
	if len(pods) != want {
		return false
	}
	for _, p := range pods {
		if !p.Ready || p.Deleting {
			return false
		}
	}
	return true
}

// startLWS runs LeaderWorkerSet (LWS_BIN, built by make lws) against the cluster until the test
// ends. Without LWS_BIN the test is skipped on a developer's machine and fails in CI, where
// `make test` always builds it.
func startLWS(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	operator.RunForTest(ctx, t, c, operator.LWSBinEnv, "lws", t.TempDir(), operator.StartLWS)
}

// lwsNamespace is the test's namespace; at the end its LeaderWorkerSets' pods are waited for,
// so the next test finds the nodes' GPUs free. The StatefulSets are deleted by hand because
// the garbage collector watches a CRD installed moments ago only from its next discovery
// resync (about 30s).
func lwsNamespace(t *testing.T) string {
	t.Helper()
	ns := namespace(t)
	t.Cleanup(func() {
		cleanup := time.Now()
		kubectl(t, "delete", "lws", "--all", "-n", ns, "--wait=false")
		kubectl(t, "delete", "sts", "-n", ns, "-l", operator.LWSNameLabel, "--wait=false")
		eventually(t, time.Minute, func() (bool, string) {
			out, _, err := c.Kubectl(context.Background(), "get", "pods", "-n", ns, "-l", operator.LWSNameLabel, "-o", "name")
			return err == nil && strings.TrimSpace(out) == "", "LeaderWorkerSet pods gone: " + out
		})
		t.Logf("LeaderWorkerSet pods gone in %v", time.Since(cleanup).Round(time.Millisecond))
	})
	return ns
}

func TestLeaderWorkerSet(t *testing.T) {
	startLWS(t)
	start := time.Now()
	ns := lwsNamespace(t)
	show := func(step string) {
		t.Helper()
		out, _, err := c.Kubectl(context.Background(), "get", "lws,sts,pods", "-n", ns, "-o", "wide")
		if err != nil {
			t.Logf("%s: kubectl get: %v", step, err)
			return
		}
		t.Logf("%s (%v):\n%s", step, time.Since(start).Round(time.Millisecond), out)
	}
	readyGroups := func() string { return jsonpath(t, ns, "lws/big", "{.status.readyReplicas}") }

	created := time.Now()
	apply(t, ns, lwsGroups)
	eventually(t, 3*time.Minute, func() (bool, string) {
		pods := lwsPods(t, ns, "big")
		return allReady(pods, 4) && readyGroups() == "2", fmt.Sprintf("4 Ready pods and readyReplicas 2; pods %+v, readyReplicas %q", pods, readyGroups())
	})
	t.Logf("2 groups of 2 pods Ready in %v", time.Since(created).Round(time.Millisecond))
	show("all groups ready")

	// The leader StatefulSet holds one leader per group; each group's workers are their own
	// StatefulSet, named after the leader pod.
	stsReplicas := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(kubectl(t, "get", "sts", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.replicas}{"\n"}{end}`)), "\n") {
		name, replicas, _ := strings.Cut(line, "=")
		stsReplicas[name] = replicas
	}
	if want := map[string]string{"big": "2", "big-0": "1", "big-1": "1"}; !maps.Equal(stsReplicas, want) {
		t.Fatalf("StatefulSets (name=replicas) %v, want %v", stsReplicas, want)
	}
	before := lwsPods(t, ns, "big")
	nodes := map[string]bool{}
	for _, p := range before {
		nodes[p.Node] = true
		t.Logf("pod %s group %s worker %s on %s, LWS_LEADER_ADDRESS=%s", p.Name, p.Group, p.Worker, p.Node, p.LeaderAddress)
	}
	if len(nodes) != 4 {
		t.Fatalf("each pod fills a node: want 4 nodes, got %v", nodes)
	}
	t.Logf("status: %s", jsonpath(t, ns, "lws/big", "{.status}"))

	// A worker of group 1 goes. The default restart policy, RecreateGroupOnPodRestart, deletes
	// the group's leader too, and the leader StatefulSet brings the group back.
	uid := map[string]string{}
	for _, p := range before {
		uid[p.Name] = p.UID
	}
	deleted := time.Now()
	kubectl(t, "delete", "pod", "big-1-1", "-n", ns, "--wait=false")
	minReady, replaced := 2, map[string]bool{}
	eventually(t, 3*time.Minute, func() (bool, string) {
		pods := lwsPods(t, ns, "big")
		// An empty readyReplicas is 0 (omitempty).
		r, _ := strconv.Atoi(readyGroups())
		if r < minReady {
			minReady = r
			show(fmt.Sprintf("readyReplicas %d after the delete", r))
		}
		for _, p := range pods {
			if uid[p.Name] != "" && p.UID != uid[p.Name] {
				replaced[p.Name] = true
			}
		}
		return allReady(pods, 4) && r == 2 && replaced["big-1-1"], fmt.Sprintf("group 1 back: pods %+v, readyReplicas %d, replaced %v", pods, r, replaced)
	})
	t.Logf("group recovered in %v; lowest readyReplicas seen %d; pods replaced %v", time.Since(deleted).Round(time.Millisecond), minReady, slices.Sorted(maps.Keys(replaced)))
	show("group recovered")
	if out, _, err := c.Kubectl(context.Background(), "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=LeaderWorkerSet", "-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`); err == nil {
		t.Logf("LeaderWorkerSet events:\n%s", out)
	}
	if replaced["big-0"] || replaced["big-0-1"] {
		t.Fatalf("group 0 was touched by a delete in group 1: replaced %v", replaced)
	}
	if !replaced["big-1"] {
		t.Errorf("the leader of group 1 was not recreated (restart policy %q)", jsonpath(t, ns, "lws/big", "{.spec.leaderWorkerTemplate.restartPolicy}"))
	}

	// Not enough nodes: through the scale subresource (what an HPA drives), a third group
	// finds no free GPUs; both its pods stay Pending with the scheduler's reason, and LWS is
	// not Available. Nothing gangs the group: each pod is scheduled on its own.
	kubectl(t, "scale", "lws/big", "-n", ns, "--replicas=3")
	eventually(t, time.Minute, func() (bool, string) {
		msgs := []string{unschedulable(t, ns, "big-2"), unschedulable(t, ns, "big-2-1")}
		return strings.Contains(msgs[0], "Insufficient nvidia.com/gpu") && strings.Contains(msgs[1], "Insufficient nvidia.com/gpu"),
			fmt.Sprintf("big-2 and big-2-1 unschedulable for GPUs: %q", msgs)
	})
	eventually(t, time.Minute, func() (bool, string) {
		st := jsonpath(t, ns, "lws/big", `{.status.replicas} {.status.readyReplicas} {.status.conditions[?(@.type=="Available")].status}`)
		return st == "3 2 False", "status replicas, readyReplicas, Available = " + st + ", want 3 2 False"
	})
	t.Logf("a third group does not fit: %s", unschedulable(t, ns, "big-2"))
	show("scaled to 3 groups on 4 nodes")

	// A group whose leader runs but whose worker cannot be placed: LWS counts it ready (a
	// group is ready when its leader is Ready and its worker StatefulSet has created its pods,
	// ready or not), so the operator must read the workers' readiness itself.
	kubectl(t, "scale", "lws/big", "-n", ns, "--replicas=1")
	eventually(t, time.Minute, func() (bool, string) {
		pods := lwsPods(t, ns, "big")
		return allReady(pods, 2), fmt.Sprintf("big down to group 0: %+v", pods)
	})
	apply(t, ns, lwsStrandedWorker)
	eventually(t, time.Minute, func() (bool, string) {
		pods := lwsPods(t, ns, "stranded")
		msg := unschedulable(t, ns, "stranded-0-1")
		return len(pods) == 2 && pods[0].Name == "stranded-0" && pods[0].Ready && msg != "",
			fmt.Sprintf("leader Ready, worker unschedulable: %+v %q", pods, msg)
	})
	eventually(t, time.Minute, func() (bool, string) {
		st := jsonpath(t, ns, "lws/stranded", `{.status.readyReplicas} {.status.conditions[?(@.type=="Available")].status}`)
		return st == "1 True", "stranded status readyReplicas, Available = " + st + ", want 1 True (LWS's count)"
	})
	t.Logf("LWS counts the stranded group ready while its worker is Pending: %s", unschedulable(t, ns, "stranded-0-1"))
	show("a group with its worker Pending")
}

// lwsStrandedWorker is one group whose worker asks for a node label no node has.
const lwsStrandedWorker = `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: stranded
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
        - name: leader
          image: kubelet.fake/ready
    workerTemplate:
      spec:
        nodeSelector: {lws.e2e/none: "true"}
        containers:
        - name: worker
          image: kubelet.fake/ready
`

// unschedulable is the scheduler's message on pod's PodScheduled=False condition, or "".
func unschedulable(t *testing.T, ns, pod string) string {
	t.Helper()
	return jsonpath(t, ns, "pod/"+pod, `{.status.conditions[?(@.type=="PodScheduled")].message}`)
}

// lwsVLLM is 2 groups of 2 pods running vLLM's multi-node launch as the operator writes it:
// the leader starts the Ray head, waits for its group, then serves; the worker joins it. Each
// pod takes a whole 8-GPU node. The workers ask for a node label that no node has yet, so the
// leaders start alone.
const lwsVLLM = `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: vllm
spec:
  replicas: 2
  startupPolicy: LeaderCreated
  leaderWorkerTemplate:
    size: 2
    restartPolicy: RecreateGroupOnPodRestart
    leaderTemplate:
      spec:
        containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          command: ["/bin/sh", "-c"]
          args: ["bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE) && exec vllm serve 'Qwen/Qwen3-8B' --port 8000 --served-model-name 'Qwen/Qwen3-8B' --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray"]
          ports: [{name: http, containerPort: 8000}]
          startupProbe: {httpGet: {path: /health, port: http}, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 360}
          readinessProbe: {httpGet: {path: /health, port: http}, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 3}
          livenessProbe: {httpGet: {path: /health, port: http}, periodSeconds: 30, timeoutSeconds: 30, failureThreshold: 10}
          resources:
            limits: {nvidia.com/gpu: 8}
          volumeMounts: [{name: shm, mountPath: /dev/shm}]
        volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 2Gi}}]
    workerTemplate:
      spec:
        nodeSelector: {lws.e2e/ray: "true"}
        containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          command: ["/bin/sh", "-c"]
          args: ["bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker --ray_address=$(LWS_LEADER_ADDRESS)"]
          resources:
            limits: {nvidia.com/gpu: 8}
          volumeMounts: [{name: shm, mountPath: /dev/shm}]
        volumes: [{name: shm, emptyDir: {medium: Memory, sizeLimit: 2Gi}}]
`

// podLog is `kubectl logs` of the pod's vllm container, or the error.
func podLog(ns, pod string) string {
	out, stderr, err := c.Kubectl(context.Background(), "logs", "-n", ns, pod, "-c", "vllm")
	if err != nil {
		return fmt.Sprintf("%v: %s", err, stderr)
	}
	return out
}

// TestLeaderWorkerSetVLLMGroups: a group's leader serves, and becomes Ready, only once its
// worker runs and joined its Ray cluster; a worker that dies takes its group's engine with it,
// and LWS brings the group back Ready.
func TestLeaderWorkerSetVLLMGroups(t *testing.T) {
	startLWS(t)
	start := time.Now()
	ns := lwsNamespace(t)
	t.Cleanup(func() { kubectl(t, "label", "nodes", "--all", "lws.e2e/ray-") })
	show := func(step string) {
		t.Helper()
		out, _, _ := c.Kubectl(context.Background(), "get", "lws,pods", "-n", ns, "-o", "wide")
		t.Logf("%s (%v):\n%s", step, time.Since(start).Round(time.Millisecond), out)
	}
	readyGroups := func() string { return jsonpath(t, ns, "lws/vllm", "{.status.readyReplicas}") }

	apply(t, ns, lwsVLLM)
	// The leaders run their script; the workers cannot be placed. Each leader waits for its
	// worker, its port closed: running, not Ready.
	for _, g := range []string{"0", "1"} {
		leader, worker := "vllm-"+g, "vllm-"+g+"-1"
		eventually(t, 2*time.Minute, func() (bool, string) {
			msg := unschedulable(t, ns, worker)
			log := podLog(ns, leader)
			return msg != "" && strings.Contains(log, "Wait for all ray workers to be active. 1/2 is active"),
				fmt.Sprintf("%s unschedulable (%q) and %s waiting for it; its log:\n%s", worker, msg, leader, log)
		})
	}
	// Give the probes time to (wrongly) pass: several readiness periods after the startup
	// probe's first runs, the leaders are still not Ready.
	waitUntil := time.Now().Add(25 * time.Second)
	eventually(t, time.Minute, func() (bool, string) {
		for _, p := range lwsPods(t, ns, "vllm") {
			if p.Worker == "0" && p.Ready {
				t.Fatalf("leader %s Ready while its worker is Pending: %+v", p.Name, lwsPods(t, ns, "vllm"))
			}
		}
		return !time.Now().Before(waitUntil), "leaders not Ready while their workers are Pending"
	})
	if st := jsonpath(t, ns, "pod/vllm-0", `{.status.containerStatuses[0].state.running.startedAt} started={.status.containerStatuses[0].started} ready={.status.containerStatuses[0].ready}`); !strings.Contains(st, "started=false ready=false") {
		t.Fatalf("leader vllm-0: %s, want running, not started, not ready", st)
	}
	if r := readyGroups(); r != "" && r != "0" {
		t.Fatalf("readyReplicas %q with no worker running", r)
	}
	show("leaders waiting for their workers")
	t.Logf("vllm-0's log while its worker is Pending:\n%s", podLog(ns, "vllm-0"))

	// The nodes get the label: the workers land on the two free nodes, join, the leaders serve.
	labeled := time.Now().Truncate(time.Second)
	kubectl(t, "label", "nodes", "--all", "lws.e2e/ray=true")
	eventually(t, 3*time.Minute, func() (bool, string) {
		pods := lwsPods(t, ns, "vllm")
		return allReady(pods, 4) && readyGroups() == "2", fmt.Sprintf("4 Ready pods and readyReplicas 2: %+v, readyReplicas %q", pods, readyGroups())
	})
	t.Logf("both groups Ready %v after the workers could be placed", time.Since(labeled).Round(time.Millisecond))
	show("groups Ready")
	for _, g := range []string{"0", "1"} {
		at := jsonpath(t, ns, "pod/vllm-"+g, `{.status.conditions[?(@.type=="Ready")].lastTransitionTime}`)
		ready, err := time.Parse(time.RFC3339, at)
		if err != nil || ready.Before(labeled) {
			t.Errorf("leader vllm-%s Ready at %q, before its worker could run (%v)", g, at, labeled)
		}
	}
	leaderLog, workerLog := podLog(ns, "vllm-0"), podLog(ns, "vllm-0-1")
	for _, want := range []string{"Ray runtime started.", "Wait for all ray workers to be active. 1/2 is active",
		"All ray workers are active and the ray cluster is initialized successfully.", "Connected to Ray cluster.",
		"tensor_parallel_size=8, pipeline_parallel_size=2", "Application startup complete."} {
		if !strings.Contains(leaderLog, want) {
			t.Errorf("leader log lacks %q:\n%s", want, leaderLog)
		}
	}
	if !strings.Contains(workerLog, "Ray runtime started.") {
		t.Errorf("worker log lacks Ray's start:\n%s", workerLog)
	}
	t.Logf("kubectl logs vllm-0:\n%s", leaderLog)
	t.Logf("kubectl logs vllm-0-1:\n%s", workerLog)

	// A worker dies: its leader's engine loses its Ray actors, LWS recreates the group.
	before := map[string]string{}
	for _, p := range lwsPods(t, ns, "vllm") {
		before[p.Name] = p.UID
	}
	killed := time.Now()
	kubectl(t, "delete", "pod", "vllm-1-1", "-n", ns, "--wait=false")
	eventually(t, 3*time.Minute, func() (bool, string) {
		pods := lwsPods(t, ns, "vllm")
		replaced := 0
		for _, p := range pods {
			if p.Group == "1" && p.UID != before[p.Name] {
				replaced++
			}
		}
		return allReady(pods, 4) && readyGroups() == "2" && replaced == 2,
			fmt.Sprintf("group 1 recreated and Ready: %+v, readyReplicas %q", pods, readyGroups())
	})
	t.Logf("group 1 recreated and Ready in %v", time.Since(killed).Round(time.Millisecond))
	for _, p := range lwsPods(t, ns, "vllm") {
		if p.Group == "0" && p.UID != before[p.Name] {
			t.Errorf("group 0's %s was replaced by a delete in group 1", p.Name)
		}
	}
	show("group 1 back")
}
