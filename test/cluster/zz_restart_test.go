// Restarting the shared cluster keeps its objects; the zz_ prefix keeps this file, and so the restart, last.

package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// The API server restarts alone, as a real one rolls: a model pod keeps answering throughout
// (none of its requests fails), keeps its container (no restart), and the API serves again
// afterwards, writes included. Runs before the whole cluster's restart below.
func TestZZAPIServerRestartKeepsPodsServing(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, servingPod("steady", vllmImage, "", ""))
	ip := engineReady(t, ns, "steady")
	uid := jsonpath(t, ns, "pod/steady", "{.metadata.uid}")
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // one request at a time, bounded in count
		defer close(done)
		client := &http.Client{Timeout: 10 * time.Second}
		for i := 0; i < 100_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			sent.Add(1)
			res, err := client.Get("http://" + ip + ":8000/v1/models")
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", res.StatusCode)
				}
			}
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	t.Logf("API server restarted alone in %v; %d requests to the pod meanwhile, %d failed", time.Since(start).Round(time.Millisecond), sent.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Fatalf("%d of %d requests to the model pod failed while the API server restarted (first: %v)", failed.Load(), sent.Load(), firstErr.Load())
	}
	if got := jsonpath(t, ns, "pod/steady", "{.metadata.uid} {.status.containerStatuses[0].restartCount}"); got != uid+" 0" {
		t.Fatalf("the pod after the API server's restart: uid and restarts %q, want %q", got, uid+" 0")
	}
	kubectl(t, "create", "configmap", "after-restart", "-n", ns, "--from-literal=k=v")
}

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
