// A node cut from the control plane (kubelet.fake/partitioned): the node lifecycle controller
// of kube-controller-manager v1.37.2 sees it stop reporting, as on a real cluster.

package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestNodeLost: the node of a Deployment's pod stops heartbeating; the node turns Ready Unknown
// and is tainted unreachable, the pod is marked not ready and evicted once its toleration ends,
// and its replacement serves on another node while the evicted pod stays Terminating (no kubelet
// confirms it). When the link returns, the node is Ready again, the taint goes and the kubelet
// finishes the deletion.
func TestNodeLost(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: lost
spec:
  replicas: 1
  selector: {matchLabels: {app: lost}}
  template:
    metadata:
      labels: {app: lost}
      annotations: {kubelet.fake/serve: "false"}
    spec:
      containers:
      - name: app
        image: kubelet.fake/ready:v1
`)
	running := func() map[string]string { // ready pod -> node, and the Terminating ones
		out, _, _ := c.Kubectl(context.Background(), "get", "pods", "-n", ns, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.containerStatuses[0].ready} {.metadata.deletionTimestamp}{"\n"}{end}`)
		pods := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) == 4:
				pods[f[0]] = "terminating on " + f[1]
			case len(f) == 3 && f[2] == "true":
				pods[f[0]] = f[1]
			}
		}
		return pods
	}
	var pod, node string
	eventually(t, 60*time.Second, func() (bool, string) {
		for p, n := range running() {
			pod, node = p, n
		}
		return pod != "", "no ready pod"
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.Kubectl(ctx, "annotate", "node", node, "kubelet.fake/partitioned-")
	})

	cut := time.Now()
	kubectl(t, "annotate", "node", node, "kubelet.fake/partitioned=true")
	nodeState := func() string {
		out, _, _ := c.Kubectl(context.Background(), "get", "node", node, "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}`)
		return out
	}
	eventually(t, 90*time.Second, func() (bool, string) {
		s := nodeState()
		return strings.HasPrefix(s, "Unknown ") && strings.Contains(s, "node.kubernetes.io/unreachable"), "node " + s
	})
	t.Logf("node %s NotReady (Unknown) and tainted unreachable %v after the cut", node, time.Since(cut).Round(time.Second))
	eventually(t, 30*time.Second, func() (bool, string) {
		r := jsonpath(t, ns, "pod/"+pod, `{.status.conditions[?(@.type=="Ready")].status}`)
		return r == "False", "pod Ready " + r
	})
	var replacement string
	eventually(t, 90*time.Second, func() (bool, string) {
		pods := running()
		replacement = ""
		for p, n := range pods {
			if p != pod && n != node && !strings.HasPrefix(n, "terminating") {
				replacement = p + " on " + n
			}
		}
		return pods[pod] == "terminating on "+node && replacement != "", "pods " + strings.TrimSpace(kubectl(t, "get", "pods", "-n", ns, "-o", "wide"))
	})
	t.Logf("%s evicted %v after the cut, still Terminating on the cut node; %s serves", pod, time.Since(cut).Round(time.Second), replacement)
	if ev := events(t, ns, pod); !strings.Contains(ev, "NodeNotReady") || !strings.Contains(ev, "TaintManagerEviction") {
		t.Errorf("the pod's events lack the node controller's NodeNotReady or the eviction:\n%s", ev)
	}

	back := time.Now()
	kubectl(t, "annotate", "node", node, "kubelet.fake/partitioned-")
	eventually(t, 60*time.Second, func() (bool, string) {
		s := nodeState()
		_, left := running()[pod]
		return strings.TrimSpace(s) == "True" && !left, "node " + s + ", evicted pod still there: " + kubectl(t, "get", "pods", "-n", ns)
	})
	t.Logf("node Ready and untainted, the evicted pod deleted %v after the link came back", time.Since(back).Round(time.Second))
}
