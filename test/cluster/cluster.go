// Options, Cluster and its lifecycle: Start, Stop, Restart.

// Package cluster starts the local Kubernetes control plane of
// test/localcluster (one child process: etcd, kube-apiserver, controllers,
// scheduler, fake nodes and a fake kubelet, all on 127.0.0.1) for tests.
//
// Typical use, one cluster shared by a test package:
//
//	func TestMain(m *testing.M) {
//		c, err := cluster.Start(context.Background(), cluster.Options{})
//		...
//		code := m.Run()
//		c.Stop()
//		os.Exit(code)
//	}
//
// Start builds the binary first when its sources changed (Build); Stop ends
// it; Restart brings it back on the same data directory and port. A running
// Cluster hands out clients (RESTConfig, Clientset, ServiceAccountKubeconfig),
// runs kubectl (Kubectl, KubectlEnv) and reads what etcd stored (EtcdGet).
package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// readyPrefix starts the one line localcluster prints on stdout when ready.
const readyPrefix = "localcluster ready "

// Options configure a cluster.
type Options struct {
	// DataDir holds etcd data, certificates and kubeconfigs. Empty: a fresh
	// temporary directory, removed by Stop.
	DataDir string
	// Fake nodes: count, nvidia.com/gpu, CPU and memory per node.
	// Zero values: 4 nodes, 8 GPUs, "32" CPU, "256Gi".
	Nodes, GPUsPerNode  int
	NodeCPU, NodeMemory string
	// Log receives the cluster's output (stdout after the ready line, and
	// stderr). Nil: <DataDir>/localcluster.log.
	Log io.Writer
	// ExtraArgs are passed to the localcluster binary, e.g.
	// "--kubelet-crash-backoff-initial=1s".
	ExtraArgs []string
	// StartTimeout bounds the wait for the ready line (default 3m).
	StartTimeout time.Duration
}

// Cluster is a running (or stopped) localcluster child process.
type Cluster struct {
	opts       Options
	bin        string
	dataDir    string
	removeDir  bool
	kubeconfig string
	port       int
	server     string
	dns        string // the cluster DNS, host:port; "": none (--kubelet-serve=false)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	logFile *os.File
	cfg     *rest.Config
	// apiRestarted receives when the process says its API server restarted (RestartAPIServer).
	apiRestarted chan struct{}

	// kubectlMu guards kubectlBin, the kubectl found on the first Kubectl call: finding it may
	// build it for minutes, which c.mu must not wait on.
	kubectlMu  sync.Mutex
	kubectlBin string
}

// Start builds localcluster if needed, starts it and waits until it is ready.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := Build(ctx)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, bin: bin}
	if opts.DataDir == "" {
		d, err := os.MkdirTemp("", "localcluster-")
		if err != nil {
			return nil, err
		}
		c.dataDir, c.removeDir = d, true
	} else {
		d, err := filepath.Abs(opts.DataDir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		c.dataDir = d
	}
	c.kubeconfig = filepath.Join(c.dataDir, "admin.kubeconfig")
	if err := c.start(ctx); err != nil {
		if c.removeDir {
			os.RemoveAll(c.dataDir)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) args() []string {
	o := c.opts
	nodes, gpus, cpu, mem := o.Nodes, o.GPUsPerNode, o.NodeCPU, o.NodeMemory
	if nodes == 0 {
		nodes = 4
	}
	if gpus == 0 {
		gpus = 8
	}
	if cpu == "" {
		cpu = "32"
	}
	if mem == "" {
		mem = "256Gi"
	}
	args := []string{
		"--data-dir=" + c.dataDir,
		"--kubeconfig=" + c.kubeconfig,
		"--apiserver-port=" + strconv.Itoa(c.port),
		"--nodes=" + strconv.Itoa(nodes),
		"--node-gpus=" + strconv.Itoa(gpus),
		"--node-cpu=" + cpu,
		"--node-memory=" + mem,
	}
	return append(args, o.ExtraArgs...)
}

func (c *Cluster) start(ctx context.Context) error {
	log := c.opts.Log
	if log == nil {
		f, err := os.OpenFile(filepath.Join(c.dataDir, "localcluster.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		c.logFile = f
		log = f
	}
	cmd := exec.Command(c.bin, c.args()...)
	cmd.Dir = c.dataDir
	cmd.Stderr = log
	// The cluster dies with the test process (Linux: parent-death signal).
	cmd.SysProcAttr = sysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	ready := make(chan string, 1)
	apiRestarted := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if !sent && strings.HasPrefix(line, readyPrefix) {
				ready <- line
				sent = true
				continue
			}
			if line == apiRestartedLine {
				select {
				case apiRestarted <- struct{}{}:
				default:
				}
			}
			fmt.Fprintln(log, line)
		}
	}()
	c.mu.Lock()
	c.cmd, c.exited, c.apiRestarted = cmd, exited, apiRestarted
	c.mu.Unlock()
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		c.exitErr = err
		c.mu.Unlock()
		close(exited)
	}()

	timeout := c.opts.StartTimeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case line := <-ready:
		if err := c.parseReady(line); err != nil {
			c.kill()
			return err
		}
	case <-exited:
		return fmt.Errorf("localcluster exited before ready: %v (log: %s)", c.exitErr, c.logHint())
	case <-timer.C:
		c.kill()
		return fmt.Errorf("localcluster not ready after %v (log: %s)", timeout, c.logHint())
	case <-ctx.Done():
		c.kill()
		return ctx.Err()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		c.kill()
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	c.cfg = cfg
	// Double-check /readyz from this side.
	return c.waitReadyz(ctx, 30*time.Second)
}

func (c *Cluster) logHint() string {
	if c.logFile != nil {
		return c.logFile.Name()
	}
	return "Options.Log"
}

func (c *Cluster) parseReady(line string) error {
	for _, f := range strings.Fields(strings.TrimPrefix(line, readyPrefix)) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "kubeconfig":
			c.kubeconfig = v
		case "dns":
			c.dns = v
		case "server":
			c.server = v
			i := strings.LastIndex(v, ":")
			p, err := strconv.Atoi(v[i+1:])
			if err != nil {
				return fmt.Errorf("bad ready line %q", line)
			}
			c.port = p
		}
	}
	if c.server == "" {
		return fmt.Errorf("bad ready line %q", line)
	}
	return nil
}

func (c *Cluster) waitReadyz(ctx context.Context, d time.Duration) error {
	cs, err := kubernetes.NewForConfig(c.cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		var code int
		cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
		if code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/readyz not ok after %v", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) kill() {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Kill()
		<-exited
	}
}

// stop sends SIGTERM and waits; SIGKILL after 30s.
func (c *Cluster) stop() error {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	select {
	case <-exited:
	default:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			return errors.New("localcluster did not stop within 30s of SIGTERM; killed")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmd = nil
	if c.logFile != nil {
		c.logFile.Close()
		c.logFile = nil
	}
	if c.exitErr != nil {
		return fmt.Errorf("localcluster exited: %w", c.exitErr)
	}
	return nil
}

// Stop stops the cluster (SIGTERM, then SIGKILL after a deadline) and
// removes the data directory if Start created it.
func (c *Cluster) Stop() error {
	err := c.stop()
	if c.removeDir {
		if rerr := os.RemoveAll(c.dataDir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// apiRestartedLine is what localcluster prints once SIGUSR1 has restarted its API server.
const apiRestartedLine = "localcluster kube-apiserver restarted"

// RestartAPIServer restarts the kube-apiserver alone, as a real cluster's API server rolls:
// the controllers, the kubelet and its pods keep running (Restart restarts all of them), and
// every client's connections and watches end. It returns once /readyz answers again.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	cmd, exited, restarted := c.cmd, c.exited, c.apiRestarted
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return errors.New("localcluster is not running")
	}
	select { // a stale notice from an earlier restart
	case <-restarted:
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return err
	}
	select {
	case <-restarted:
	case <-exited:
		return fmt.Errorf("localcluster exited while its API server restarted: %v (log: %s)", c.exitErr, c.logHint())
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("localcluster's API server not restarted after 2m (log: %s)", c.logHint())
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.waitReadyz(ctx, 90*time.Second)
}

// Restart stops the cluster and starts it again on the same data directory
// and the same port.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.stop(); err != nil {
		return err
	}
	return c.start(ctx)
}
