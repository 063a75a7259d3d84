// Exec images: a container whose image is named by --exec-image PREFIX=PATH runs PATH (or, when
// PATH is an unpacked image, the file its command names in it) as a real OS process, as a
// runtime would run the image's entrypoint: its command and args, its resolved environment, its
// own process group, stdout and stderr into the container's log, a kubeconfig holding a token
// of the pod's ServiceAccount, SIGTERM then SIGKILL when the kubelet stops it. It listens on
// $LOCALCLUSTER_POD_IP, where the probes and clients reach it.

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// execImage is one --exec-image PREFIX=PATH.
type execImage struct {
	prefix string // a repository, or a path ending in "/" for every repository under it
	path   string // absolute path of the executable: the image's entrypoint
	// rootfs is set when PATH is an unpacked image (its config.json and rootfs/): a container's
	// command then names a file in it, as a runtime resolves it in the image's filesystem, so
	// one image can hold several binaries.
	rootfs string
}

// binary is what a container of the image runs: the entrypoint, or in an unpacked image the
// file its command names (a missing one fails to start, as it does in a runtime).
func (x execImage) binary(command []string) string {
	if x.rootfs != "" && len(command) > 0 {
		return filepath.Join(x.rootfs, command[0])
	}
	return x.path
}

// unpackedImage reads an unpacked image's entrypoint from its config.json (the OCI image
// configuration) and returns it within the image's rootfs/.
func unpackedImage(dir string) (entrypoint, rootfs string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return "", "", fmt.Errorf("an unpacked image needs config.json: %w", err)
	}
	var cf struct {
		Config struct{ Entrypoint []string }
	}
	if err := json.Unmarshal(b, &cf); err != nil {
		return "", "", fmt.Errorf("%s/config.json: %w", dir, err)
	}
	if len(cf.Config.Entrypoint) != 1 {
		return "", "", fmt.Errorf("%s/config.json: entrypoint %q, want one path", dir, cf.Config.Entrypoint)
	}
	rootfs = filepath.Join(dir, "rootfs")
	return filepath.Join(rootfs, cf.Config.Entrypoint[0]), rootfs, nil
}

// execImages is the repeatable --exec-image flag.
type execImages []execImage

func (e *execImages) String() string {
	var s []string
	for _, x := range *e {
		s = append(s, x.prefix+"="+x.path)
	}
	return strings.Join(s, ",")
}

// Set parses PREFIX=PATH; PATH must be an executable file, or an unpacked image whose
// entrypoint is one (a typo fails at start, not as a container that never starts).
func (e *execImages) Set(v string) error {
	prefix, path, ok := strings.Cut(v, "=")
	if !ok || prefix == "" || path == "" {
		return fmt.Errorf("want PREFIX=PATH, got %q", v)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	x := execImage{prefix: prefix, path: abs}
	st, err := os.Stat(abs)
	if err == nil && st.IsDir() {
		if x.path, x.rootfs, err = unpackedImage(abs); err == nil {
			st, err = os.Stat(x.path)
		}
	}
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", x.path)
	}
	*e = append(*e, x)
	return nil
}

// imageRepository is the image without its tag and digest.
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// match is the flag an image runs by. The repository must equal a prefix (any tag or digest),
// or lie under a prefix ending in "/"; the first flag that matches wins.
func (e execImages) match(image string) (execImage, bool) {
	repo := imageRepository(image)
	for _, x := range e {
		if repo == x.prefix || (strings.HasSuffix(x.prefix, "/") && strings.HasPrefix(repo, x.prefix)) {
			return x, true
		}
	}
	return execImage{}, false
}

// execPath is the entrypoint an image runs as; "": none.
func (e execImages) execPath(image string) string {
	x, _ := e.match(image)
	return x.path
}

// execArgv is what the runtime runs, as Kubernetes composes an image's entrypoint with the
// container's command and args: the image's entrypoint is PATH itself, so a command's first
// word names it (its argv[0] is PATH) and the rest of the command goes before the args.
// command and args are already $(VAR)-expanded.
func execArgv(path string, command, args []string) []string {
	argv := []string{path}
	if len(command) > 0 {
		argv = append(argv, command[1:]...)
	}
	return append(argv, args...)
}

// tokenSeconds is the lifetime of the ServiceAccount tokens the kubelet requests, its own
// default for projected tokens; it refreshes one at 80% of its life, as the kubelet does.
const tokenSeconds = 3600

// maxGrace bounds the time between SIGTERM and SIGKILL whatever the pod asks, so a process
// that ignores SIGTERM cannot hold a test (or the cluster's exit) for long.
const maxGrace = 30 * time.Second

// execProcess is one run of an exec container: the process and its group.
type execProcess struct {
	cmd    *exec.Cmd
	pid    int
	pod    types.UID
	grace  time.Duration
	exited chan proc.Exit // the exit when the process ends on its own; nothing once stopped
	done   chan struct{}  // closed when the process has ended and its output is in the log

	mu      sync.Mutex
	stopped bool
	kill    *time.Timer
}

// execProcs are the kubelet's live processes, so deletion can wait for a pod's and the
// cluster's exit can end them all.
type execProcs struct {
	mu     sync.Mutex
	live   map[*execProcess]struct{}
	closed bool // the cluster is stopping: nothing starts any more
}

func newExecProcs() *execProcs { return &execProcs{live: map[*execProcess]struct{}{}} }

// startExec starts the process; a failure to start is the runtime's StartError (exit 128),
// reported on Exited like any exit.
func (k *kubelet) startExec(pod *v1.Pod, spec proc.Spec, log *proc.Log) *execProcess {
	p := &execProcess{pod: pod.UID, grace: podGrace(pod), exited: make(chan proc.Exit, 1), done: make(chan struct{})}
	fail := func(err error) *execProcess {
		log.Printf("%v", err)
		p.exited <- proc.Exit{Code: 128, Reason: "StartError"}
		close(p.done)
		return p
	}
	argv := execArgv(spec.Exec, spec.Command, spec.Args)
	if len(spec.PodExec) > 0 {
		argv = append(append([]string(nil), spec.PodExec...), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = execEnv(spec.Env, spec.Dir)
	cmd.Dir = spec.Dir
	// Its own process group, killed as a whole as a container's processes die with it; the
	// leader also dies with this process if it is killed without a chance to stop it. Through
	// the pod-exec helper, in a mount namespace of its own (its volumes, its resolv.conf).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if len(spec.PodExec) > 0 {
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	cmd.Stdout, cmd.Stderr = w, w // one stream, in the order written, as `kubectl logs` shows both
	k.procs.mu.Lock()
	if k.procs.closed {
		k.procs.mu.Unlock()
		r.Close()
		w.Close()
		return fail(errors.New("the node is shutting down"))
	}
	err = cmd.Start()
	if err == nil {
		p.cmd, p.pid = cmd, cmd.Process.Pid // before another goroutine can find it to stop it
		k.procs.live[p] = struct{}{}
	}
	k.procs.mu.Unlock()
	w.Close()
	if err != nil {
		r.Close()
		return fail(fmt.Errorf("failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: %q: %v", argv[0], err))
	}
	output := make(chan struct{})
	go func() {
		defer close(output)
		defer r.Close()
		br := bufio.NewReaderSize(r, 16<<10)
		for {
			// A line longer than the buffer comes in pieces, as a runtime splits long lines.
			line, _, err := br.ReadLine()
			if len(line) > 0 || err == nil {
				log.Printf("%s", line)
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		// The rest of the group dies with its leader, as a container's processes die with its
		// init; then the pipe closes and the last lines are in the log.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		select {
		case <-output:
		case <-time.After(2 * time.Second): // a descendant that left the group holds the pipe
		}
		st := exitOf(cmd.ProcessState, err)
		p.mu.Lock()
		if p.kill != nil {
			p.kill.Stop()
		}
		if !p.stopped {
			p.exited <- st
		}
		p.stopped = true
		p.mu.Unlock()
		k.procs.mu.Lock()
		delete(k.procs.live, p)
		k.procs.mu.Unlock()
		close(p.done)
	}()
	return p
}

// exitOf is the container's terminated state: a signal is 128+its number, as runtimes report.
func exitOf(ps *os.ProcessState, err error) proc.Exit {
	if ps == nil {
		return proc.Exit{Code: 128, Reason: "Error"}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return proc.Exit{Code: 128 + int32(ws.Signal()), Reason: "Error"}
	}
	if code := ps.ExitCode(); code != 0 {
		return proc.Exit{Code: int32(code), Reason: "Error"}
	}
	return proc.Exit{Code: 0, Reason: "Completed"}
}

// execEnv is the process's environment: the container's, over this machine's PATH and a HOME
// in the container's own directory, so ordinary programs work (an image would set both).
func execEnv(env map[string]string, dir string) []string {
	base := map[string]string{"PATH": os.Getenv("PATH"), "HOME": dir}
	for k, v := range env {
		base[k] = v
	}
	out := make([]string, 0, len(base))
	for k, v := range base {
		out = append(out, k+"="+v)
	}
	return out
}

// podGrace is how long a stopped process gets between SIGTERM and SIGKILL: the deletion's grace
// period, else terminationGracePeriodSeconds (default 30), at most maxGrace.
func podGrace(pod *v1.Pod) time.Duration {
	g := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.DeletionGracePeriodSeconds != nil {
		g = *pod.DeletionGracePeriodSeconds
	}
	return min(max(time.Duration(g)*time.Second, 0), maxGrace)
}

func (p *execProcess) Exited() <-chan proc.Exit { return p.exited }

// Stop is the runtime stopping the container: SIGTERM to the group, SIGKILL after the grace
// period. It returns at once; calling it again does nothing.
func (p *execProcess) Stop() { p.stop(p.grace) }

func (p *execProcess) stop(grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.stopped {
		p.stopped = true
		return
	}
	p.stopped = true
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	p.kill = time.AfterFunc(grace, func() { _ = syscall.Kill(-p.pid, syscall.SIGKILL) })
}

// killNow is SIGKILL to the group, for a grace period that is over.
func (p *execProcess) killNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.cmd != nil {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

// of is the live processes of one pod; every live one, for "".
func (e *execProcs) of(uid types.UID) []*execProcess {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*execProcess
	for p := range e.live {
		if uid == "" || p.pod == uid {
			out = append(out, p)
		}
	}
	return out
}

// stopAndWait stops the processes (SIGTERM) and waits for them to end; those still running
// after grace are killed, and waited for a little more.
func stopAndWait(ps []*execProcess, grace time.Duration) {
	for _, p := range ps {
		p.stop(grace)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for _, p := range ps {
		select {
		case <-p.done:
			continue
		case <-deadline.C:
		}
		for _, q := range ps {
			q.killNow()
		}
		break
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
			klog.InfoS("fake kubelet: process did not end after SIGKILL", "pid", p.pid)
		}
	}
}

// stopPod ends a deleted pod's processes before its deletion completes, as a kubelet deletes
// the pod only once its containers stopped: SIGTERM, SIGKILL after the deletion's grace period.
func (k *kubelet) stopPod(pod *v1.Pod) {
	if ps := k.procs.of(pod.UID); len(ps) > 0 {
		stopAndWait(ps, podGrace(pod))
	}
}

// stopProcesses ends every process when the cluster stops, so none outlives it: SIGTERM,
// SIGKILL after grace.
func (k *kubelet) stopProcesses(grace time.Duration) {
	k.procs.mu.Lock()
	k.procs.closed = true
	k.procs.mu.Unlock()
	stopAndWait(k.procs.of(""), grace)
}

// execKubeconfig writes the pod's kubeconfig: the API server, the cluster CA, and a token of
// the pod's ServiceAccount bound to the pod (TokenRequest, the API server's default audience)
// in a file next to it, which a refresher rewrites before it expires (client-go rereads a
// tokenFile). The process thus has its ServiceAccount's RBAC, as in a real pod.
func (ps *podState) execKubeconfig() (string, error) {
	if ps.kubeconfig != "" {
		return ps.kubeconfig, nil
	}
	dir := filepath.Join(ps.k.cfg.execDir, string(ps.pod.UID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tokenFile := filepath.Join(dir, "token")
	exp, err := ps.writeToken(tokenFile)
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(ps.k.cfg.caFile)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: ps.k.cfg.apiServer, CertificateAuthorityData: ca}
	cfg.AuthInfos["serviceaccount"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["pod"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: "serviceaccount", Namespace: ps.pod.Namespace}
	cfg.CurrentContext = "pod"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	ps.kubeconfig = path
	go ps.refreshToken(tokenFile, exp)
	return path, nil
}

// writeToken requests a token and replaces the file atomically; it returns its expiry.
func (ps *podState) writeToken(path string) (time.Time, error) {
	sa := ps.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	secs := int64(tokenSeconds)
	tr, err := ps.k.client.CoreV1().ServiceAccounts(ps.pod.Namespace).CreateToken(ps.ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &secs,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: ps.pod.Name, UID: ps.pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("failed to fetch token: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tr.Status.Token), 0o600); err != nil {
		return time.Time{}, err
	}
	exp := tr.Status.ExpirationTimestamp.Time
	if exp.IsZero() {
		exp = time.Now().Add(tokenSeconds * time.Second)
	}
	return exp, os.Rename(tmp, path)
}

// refreshToken rewrites the token at 80% of its life until the pod worker ends; a failed
// request is retried every 10 s.
func (ps *podState) refreshToken(path string, exp time.Time) {
	issued := time.Now()
	for {
		wait := time.Duration(float64(exp.Sub(issued)) * 0.8)
		t := time.NewTimer(time.Until(issued.Add(wait)))
		select {
		case <-ps.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for {
			e, err := ps.writeToken(path)
			if err == nil {
				issued, exp = time.Now(), e
				break
			}
			if ps.ctx.Err() != nil {
				return
			}
			klog.ErrorS(err, "fake kubelet: token refresh failed", "pod", klog.KObj(ps.pod))
			r := time.NewTimer(10 * time.Second)
			select {
			case <-ps.ctx.Done():
				r.Stop()
				return
			case <-r.C:
			}
		}
	}
}

// execSpec adds to a serving spec what an exec container's process gets from the kubelet:
// the executable, LOCALCLUSTER_POD_IP, KUBECONFIG, a working directory of its own.
func (ps *podState) execSpec(spec *proc.Spec, path string, c *ctr) error {
	kc, err := ps.execKubeconfig()
	if err != nil {
		return err
	}
	dir := filepath.Join(ps.k.cfg.execDir, string(ps.pod.UID), "containers", c.spec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	spec.Exec, spec.Dir = path, dir
	spec.Env["LOCALCLUSTER_POD_IP"] = ps.ip
	spec.Env["KUBECONFIG"] = kc
	if _, ok := spec.Env["HOSTNAME"]; !ok {
		spec.Env["HOSTNAME"] = ps.pod.Name // the runtime sets the pod's hostname
	}
	if sn := ps.k.cfg.serviceNet; sn != nil {
		return ps.podExecSpec(spec, sn, c)
	}
	return nil
}

// podExecSpec starts the process through the pod-exec helper: the pod's resolv.conf and the
// container's volumes, written under the pod's directory.
func (ps *podState) podExecSpec(spec *proc.Spec, sn *serviceNetwork, c *ctr) error {
	podDir := filepath.Join(ps.k.cfg.execDir, string(ps.pod.UID))
	resolv := ""
	if rc := resolvConf(ps.pod, sn.dnsIP()); rc != "" {
		resolv = filepath.Join(podDir, "resolv.conf")
		if err := os.WriteFile(resolv, []byte(rc), 0o644); err != nil {
			return err
		}
	}
	mounts, err := podMounts(ps.ctx, volumeSource{client: ps.k.client, pod: ps.pod}, &c.spec, podDir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	spec.PodExec = podExecArgv(self, resolv, mounts, nil)
	return nil
}

// dropExecDir removes a deleted pod's kubeconfig, token and working directories.
func (k *kubelet) dropExecDir(uid types.UID) {
	if k.cfg.execDir != "" {
		_ = os.RemoveAll(filepath.Join(k.cfg.execDir, string(uid)))
	}
}
