package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// BuildAdapter compiles the metrics adapter (the image's second binary) into dir.
func BuildAdapter(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "inferenceservice-metrics-adapter")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./metrics/adapter")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build metrics adapter: %w\n%s", err, out)
	}
	return bin, nil
}

// Adapter is one running metrics adapter, serving on Addr (127.0.0.1:port) over HTTPS.
type Adapter struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// StartAdapter runs bin serving on 127.0.0.1:port with kubeconfig for every client (lister,
// delegated authentication and authorization), its certificates in certDir, and waits until
// /readyz answers.
func StartAdapter(ctx context.Context, bin, logPath, kubeconfig, certDir string, port int, args ...string) (*Adapter, error) {
	full := append([]string{
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + certDir,
		"--lister-kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
	}, args...)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, full...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &Adapter{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(a.done) }()
	// Its own self-signed certificate, as the aggregator sees it (insecureSkipTLSVerify).
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := c.Get("https://" + a.Addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a, nil
			}
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("metrics adapter exited before serving; see %s", logPath)
		case <-ctx.Done():
			a.Kill()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.Kill()
			return nil, fmt.Errorf("metrics adapter not ready in 60s; see %s", logPath)
		}
	}
}

// Kill stops the adapter at once, as a node loss would.
func (a *Adapter) Kill() {
	_ = a.cmd.Process.Kill()
	<-a.done
	a.log.Close()
}

// Pid is the adapter's process id.
func (a *Adapter) Pid() int { return a.cmd.Process.Pid }
