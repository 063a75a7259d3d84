package incluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// inClusterWrapper writes an executable that runs the operator the way a pod does: the
// ServiceAccount's token, CA and namespace at /var/run/secrets/kubernetes.io/serviceaccount and
// KUBERNETES_SERVICE_HOST/PORT set, with no --kubeconfig. The files appear there only inside a
// private mount namespace (unshare), where a directory is bind-mounted over /run (/var/run's
// target), so the machine's own /var/run is neither read nor touched. unshare and sh exec in
// place, so the operator keeps the wrapper's pid (and its parent-death signal).
func inClusterWrapper(t *testing.T, saNamespace, saName string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	kc, err := env.Cluster.ServiceAccountKubeconfig(testenv.Ctx(t, time.Minute), saNamespace, saName)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	token := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token
	ca := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].CertificateAuthorityData

	run := filepath.Join(t.TempDir(), "run")
	sa := filepath.Join(run, "secrets", "kubernetes.io", "serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte(saNamespace)} {
		if err := os.WriteFile(filepath.Join(sa, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	server := env.Cluster.Server() // https://127.0.0.1:PORT
	port, err := strconv.Atoi(server[strings.LastIndex(server, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=%d
unset KUBECONFIG
exec %s --mount --propagation private -- /bin/sh -c 'mount --bind "$0" /run && exec "$@"' %q %q "$@"
`, port, unshare, run, env.Bin)
	wrapper := filepath.Join(t.TempDir(), "incluster-operator")
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// TestInClusterConfig: with no --kubeconfig the operator authenticates with the mounted
// ServiceAccount token, trusts the mounted CA, reaches the API server through
// KUBERNETES_SERVICE_HOST/PORT, and --leader-elect without --leader-election-namespace puts
// the Lease in the namespace read from the namespace file.
func TestInClusterConfig(t *testing.T) {
	ns := env.Namespace(t)
	const lease = "isvc-incluster-test"
	wrapper := inClusterWrapper(t, systemNamespace, "inferenceservice-operator")
	p := startOperator(t, wrapper, "incluster", "--namespaces="+ns, "--leader-elect",
		"--leader-election-id="+lease, "--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s", "--leader-election-retry-period=250ms", "-v=2")

	waitHolder(t, systemNamespace, lease, identity(t, p), time.Now(), 30*time.Second)
	createISVC(t, ns, "qwen3", 1)
	env.WaitPhase(t, ns, "qwen3", crd.PhaseReady, 90*time.Second)

	log, err := os.ReadFile(filepath.Join(env.Dir, "incluster.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `lease="`+systemNamespace+"/"+lease+`"`) {
		t.Errorf("no leadership of %s/%s in the log", systemNamespace, lease)
	}
	// The files never appeared outside the operator's mount namespace.
	if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
		t.Error("/var/run/secrets/kubernetes.io/serviceaccount/token exists on the host")
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if h, _ := leaseHolder(systemNamespace, lease); h != "" {
		t.Fatalf("lease still held by %q after SIGTERM; want released", h)
	}
}
