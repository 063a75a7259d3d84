// Restarting the shared cluster keeps its objects; the zz_ prefix keeps this file, and so the restart, last.

package cluster_test

import (
	"context"
	"testing"
	"time"
)

// Runs last (go test runs files in name order, tests in source order): it
// restarts the shared cluster.
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
