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
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultKubectl is kubectl 1.33 on the project's machines; env KUBECTL overrides it.
const DefaultKubectl = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"

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

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	logFile *os.File
	cfg     *rest.Config
}

// ---- build ----

// RepoRoot returns the root of the repository (the directory holding the
// root go.mod), found from this file's location or `go env GOMOD`.
func RepoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if exists(filepath.Join(root, "test", "localcluster", "go.mod")) {
			return root, nil
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("cannot find the repository root (no go.mod)")
	}
	root := filepath.Dir(gomod)
	for d := root; ; d = filepath.Dir(d) {
		if exists(filepath.Join(d, "test", "localcluster", "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("no test/localcluster above %s", root)
}

// LDFlags are the linker flags every build of localcluster uses: they stamp
// the Kubernetes version, or the server would report v0.0.0-master. Keep
// them identical everywhere (test/localcluster/build.sh reads the same
// file) so the Go build cache is shared.
func LDFlags(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "test", "localcluster", "ldflags"))
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

// sourceHash hashes the localcluster sources, go.mod/go.sum, the ldflags
// and the Go version: the binary is rebuilt when any of them changes.
func sourceHash(dir, ldflags string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "bin" || strings.HasPrefix(d.Name(), ".") && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		n := d.Name()
		if strings.HasSuffix(n, ".go") || n == "go.mod" || n == "go.sum" || n == "ldflags" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s/%s\n", runtime.Version(), ldflags, runtime.GOOS, runtime.GOARCH)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Build builds test/localcluster once and returns the binary's path. The
// binary is cached in test/localcluster/bin/ keyed by a hash of the
// sources; a file lock keeps parallel test processes from building twice.
// Env LOCALCLUSTER_BIN names a prebuilt binary instead.
func Build(ctx context.Context) (string, error) {
	if bin := os.Getenv("LOCALCLUSTER_BIN"); bin != "" {
		if !exists(bin) {
			return "", fmt.Errorf("LOCALCLUSTER_BIN=%s does not exist", bin)
		}
		return bin, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "test", "localcluster")
	ldflags, err := LDFlags(root)
	if err != nil {
		return "", err
	}
	hash, err := sourceHash(dir, ldflags)
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "localcluster-"+hash)
	if exists(bin) {
		return bin, nil
	}
	lock, err := os.OpenFile(filepath.Join(binDir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := flock(ctx, lock); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if exists(bin) { // built by another process while we waited
		return bin, nil
	}
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	fmt.Fprintf(os.Stderr, "cluster: building %s (a cold Go cache takes 7-9 minutes on 2 cores)\n", bin)
	started := time.Now()
	defer func() { fmt.Fprintf(os.Stderr, "cluster: build took %v\n", time.Since(started).Round(time.Second)) }()
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", ldflags, "-o", tmp, ".")
	cmd.Dir = dir
	cmd.Env = append(buildEnv(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("building localcluster: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	// Keep only the newest binary around.
	if old, _ := filepath.Glob(filepath.Join(binDir, "localcluster-*")); len(old) > 0 {
		for _, o := range old {
			if o != bin && !strings.Contains(o, ".tmp") {
				os.Remove(o)
			}
		}
	}
	return bin, nil
}

// buildEnv is the environment without settings that would point the build
// at another module file.
func buildEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "GOFLAGS=") && strings.Contains(e, "-modfile") {
			continue
		}
		if strings.HasPrefix(e, "CGO_ENABLED=") || strings.HasPrefix(e, "GOWORK=") {
			continue
		}
		env = append(env, e)
	}
	return append(env, "GOWORK=off")
}

func flock(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ---- lifecycle ----

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
			fmt.Fprintln(log, line)
		}
	}()
	c.mu.Lock()
	c.cmd, c.exited = cmd, exited
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

// Restart stops the cluster and starts it again on the same data directory
// and the same port.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.stop(); err != nil {
		return err
	}
	return c.start(ctx)
}

// ---- accessors ----

func (c *Cluster) KubeconfigPath() string { return c.kubeconfig }
func (c *Cluster) DataDir() string        { return c.dataDir }

// Server is the API server URL, https://127.0.0.1:PORT.
func (c *Cluster) Server() string { return c.server }

// RESTConfig returns a copy of the admin rest.Config.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.cfg) }

// Clientset returns an admin clientset.
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.RESTConfig())
}

// ServiceAccountKubeconfig issues a token for the ServiceAccount through the
// TokenRequest API (valid 2h) and writes a kubeconfig using it.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	cs, err := c.Clientset()
	if err != nil {
		return "", err
	}
	exp := int64(7200)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest %s/%s: %w", namespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: c.cfg.Host, CertificateAuthorityData: c.cfg.CAData}
	user := "system:serviceaccount:" + namespace + ":" + name
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "localcluster"
	dir := filepath.Join(c.dataDir, "sa-kubeconfigs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, namespace+"."+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

// KubectlPath is env KUBECTL, else kubectl 1.33 at DefaultKubectl, else
// kubectl from PATH.
func KubectlPath() string {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	if exists(DefaultKubectl) {
		return DefaultKubectl
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	return DefaultKubectl
}

// Kubectl runs kubectl with the admin kubeconfig; HOME and TMPDIR point
// inside the data directory.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return c.KubectlEnv(ctx, nil, args...)
}

// KubectlEnv is Kubectl with extra environment variables (e.g. EDITOR=...).
// A --kubeconfig in args overrides the admin one.
func (c *Cluster) KubectlEnv(ctx context.Context, env []string, args ...string) (stdout, stderr string, err error) {
	home := filepath.Join(c.dataDir, "kubectl-home")
	tmp := filepath.Join(c.dataDir, "kubectl-tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", err
		}
	}
	full := args
	hasKubeconfig := false
	for _, a := range args {
		if a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=") {
			hasKubeconfig = true
		}
	}
	if !hasKubeconfig {
		full = append([]string{"--kubeconfig=" + c.kubeconfig}, args...)
	}
	cmd := exec.CommandContext(ctx, KubectlPath(), full...)
	var base []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "HOME", "TMPDIR", "KUBECONFIG", "KUBECTL_EXTERNAL_DIFF", "KUBE_EDITOR", "EDITOR":
			continue
		}
		base = append(base, e)
	}
	cmd.Env = append(append(base, "HOME="+home, "TMPDIR="+tmp), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(se.String()))
	}
	return so.String(), se.String(), err
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// EtcdURL is the embedded etcd's client URL (plain HTTP on loopback), for tests that read
// what the API server stored.
func (c *Cluster) EtcdURL() (string, error) {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "etcd-client.port"))
	if err != nil {
		return "", err
	}
	return "http://127.0.0.1:" + strings.TrimSpace(string(b)), nil
}

// EtcdGet returns the bytes the API server stored at key (such as
// /registry/ai.example.com/inferenceservices/ns/name), nil when absent, through etcd's JSON
// gateway so the tests need no etcd client.
func (c *Cluster) EtcdGet(ctx context.Context, key string) ([]byte, error) {
	base, err := c.EtcdURL()
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v3/kv/range", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		KVs []struct {
			Value []byte `json:"value"` // base64 in JSON, decoded by encoding/json
		} `json:"kvs"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("etcd range %s: %s: %s", key, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if len(out.KVs) == 0 {
		return nil, nil
	}
	return out.KVs[0].Value, nil
}
