// The shared cluster (TestMain), the tests' helpers, and the cluster's own surface: version, nodes, ServiceAccounts.

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
	"github.com/example/inferenceservice-operator/test/testenv"
)

// One cluster shared by every test in the package; each test uses its own
// namespace.
var c *cluster.Cluster

func TestMain(m *testing.M) {
	var dir string
	var stopErr error
	code := testenv.Suite{Name: "cluster",
		// The cluster alone, yet built from its module when LOCALCLUSTER_BIN is unset.
		SetupTimeout: 30 * time.Minute,
		Setup: func(ctx context.Context) error {
			start := time.Now()
			var err error
			if dir, err = os.MkdirTemp("", "localcluster-"); err != nil {
				return err
			}
			// A silent node is NotReady after 20 s and its pods evicted 10 s later (nodelost_test.go);
			// the defaults, 50 s and 5 min, would make that test wait minutes.
			c, err = cluster.Start(ctx, cluster.Options{DataDir: dir, ExtraArgs: []string{"--node-monitor-grace-period=20s", "--pod-eviction-seconds=10"}})
			if err != nil {
				return fmt.Errorf("starting localcluster: %w", err)
			}
			fmt.Fprintf(os.Stderr, "localcluster ready in %v at %s (data %s)\n", time.Since(start).Round(time.Millisecond), c.Server(), c.DataDir())
			return nil
		},
		Teardown: func(keep bool) {
			if c != nil {
				if stopErr = c.Stop(); stopErr != nil {
					fmt.Fprintf(os.Stderr, "stopping localcluster: %v\n", stopErr)
				}
			}
			if dir != "" && !keep {
				_ = os.RemoveAll(dir)
			}
		},
		Logs: func() string {
			tail := ""
			if b, err := os.ReadFile(filepath.Join(dir, "localcluster.log")); err == nil {
				lines := strings.Split(string(b), "\n")
				if len(lines) > 80 {
					lines = lines[len(lines)-80:]
				}
				tail = "---- last lines of localcluster.log ----\n" + strings.Join(lines, "\n") + "\n"
			}
			return tail + "localcluster data in " + dir
		},
	}.Run(m)
	if stopErr != nil && code == 0 {
		code = 1
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

// ---- the cluster's own surface ----

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
