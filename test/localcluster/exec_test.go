package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// TestMain lets the test binary be the exec image's program: with EXEC_TEST_CHILD in its
// environment it is the child, not the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("EXEC_TEST_CHILD") {
	case "":
		os.Exit(m.Run())
	case "pod-exec": // the helper, as localcluster pod-exec runs it (servicenet_test.go)
		fmt.Fprintln(os.Stderr, podExec(os.Args[2:])) // os.Args[1] is pod-exec
		os.Exit(128)
	case "grandchild":
		for { // a process the child started: it dies with the child's group
			time.Sleep(time.Hour)
		}
	default:
		os.Exit(execTestChild())
	}
}

// execTestChild is the program the exec tests run: it prints its pid, args and environment,
// checks its kubeconfig's RBAC (EXEC_TEST_RBAC), serves HTTP on :8080 and grpc.health.v1 on
// :9090 of $LOCALCLUSTER_POD_IP, exits 3 after EXEC_TEST_EXIT_AFTER, ignores SIGTERM with
// EXEC_TEST_IGNORE_TERM, and else exits 0 on SIGTERM.
func execTestChild() int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Printf("pid=%d\n", os.Getpid())
	fmt.Printf("args=%q\n", os.Args)
	env := os.Environ()
	sort.Strings(env)
	for _, e := range env {
		fmt.Printf("env %s\n", e)
	}
	if os.Getenv("EXEC_TEST_RBAC") != "" {
		if err := execTestRBAC(); err != nil {
			fmt.Fprintf(os.Stderr, "rbac: %v\n", err)
			return 4
		}
		fmt.Println("rbac ok: pods listed, secrets forbidden")
	}
	if os.Getenv("EXEC_TEST_SPAWN") != "" {
		gc := exec.Command(os.Args[0], os.Args[1:]...)
		gc.Env = append(os.Environ(), "EXEC_TEST_CHILD=grandchild")
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 5
		}
		fmt.Printf("grandchild=%d\n", gc.Process.Pid)
	}
	if d, err := time.ParseDuration(os.Getenv("EXEC_TEST_EXIT_AFTER")); err == nil {
		time.AfterFunc(d, func() {
			fmt.Fprintln(os.Stderr, "crashing with exit code 3")
			os.Exit(3)
		})
	}
	ip := os.Getenv("LOCALCLUSTER_POD_IP")
	hl, err := net.Listen("tcp", net.JoinHostPort(ip, "8080"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		_ = http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				http.NotFound(w, r)
			}
		}))
	}()
	gl, err := net.Listen("tcp", net.JoinHostPort(ip, "9090"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("exectest", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(gl) }()
	fmt.Printf("listening on %s:8080 and %s:9090\n", ip, ip)
	for range term {
		if os.Getenv("EXEC_TEST_IGNORE_TERM") != "" {
			fmt.Println("got SIGTERM, ignoring it")
			continue
		}
		fmt.Println("got SIGTERM, exiting")
		return 0
	}
	return 0
}

// execTestRBAC uses $KUBECONFIG as the pod's ServiceAccount: it may list pods, not secrets.
func execTestRBAC() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := os.Getenv("POD_NAMESPACE")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("list secrets: want forbidden, got %v", err)
	}
	return nil
}

func TestExecImageMatch(t *testing.T) {
	e := execImages{{prefix: "registry.k8s.io/gateway-api-inference-extension/epp", path: "/bin/epp"}, {prefix: "example.test/", path: "/bin/any"}}
	for img, want := range map[string]string{
		"registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0":       "/bin/epp",
		"registry.k8s.io/gateway-api-inference-extension/epp@sha256:abcd":  "/bin/epp",
		"registry.k8s.io/gateway-api-inference-extension/epp":              "/bin/epp",
		"registry.k8s.io/gateway-api-inference-extension/epp-extra:v1.5.0": "",
		"registry.k8s.io/gateway-api-inference-extension/bbr:v1.5.0":       "",
		"example.test/a/b:v1":      "/bin/any",
		"vllm/vllm-openai:v0.11.0": "",
		"localhost:5000/registry.k8s.io/gateway-api-inference-extension/epp": "",
	} {
		if got := e.execPath(img); got != want {
			t.Errorf("%s: %q, want %q", img, got, want)
		}
	}
	for _, c := range []struct {
		command, args, want []string
	}{
		{nil, nil, []string{"/p"}},
		{nil, []string{"-a", "b"}, []string{"/p", "-a", "b"}},
		{[]string{"/epp"}, []string{"-a"}, []string{"/p", "-a"}},
		{[]string{"epp", "--x"}, []string{"-a"}, []string{"/p", "--x", "-a"}},
	} {
		if got := execArgv("/p", c.command, c.args); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q %q: %q, want %q", c.command, c.args, got, c.want)
		}
	}
	var f execImages
	if err := f.Set("x"); err == nil {
		t.Error("no = accepted")
	}
	if err := f.Set("x=/nonexistent/bin"); err == nil {
		t.Error("a missing executable accepted")
	}
}

// TestExecUnpackedImage: an unpacked image runs its config's entrypoint, or the file a
// container's command names in its rootfs (one image, several binaries, as the operator's).
func TestExecUnpackedImage(t *testing.T) {
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"entry", "second"} {
		if err := os.WriteFile(filepath.Join(rootfs, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var f execImages
	if err := f.Set("example.test/img=" + dir); err == nil {
		t.Fatal("an unpacked image without config.json accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architecture":"amd64","config":{"Entrypoint":["/entry"],"User":"65532"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Set("example.test/img=" + dir); err != nil {
		t.Fatal(err)
	}
	x, ok := f.match("example.test/img:v1@sha256:abcd")
	if !ok {
		t.Fatal("no match")
	}
	for _, c := range []struct {
		command []string
		want    string
	}{
		{nil, filepath.Join(rootfs, "entry")},
		{[]string{"/second", "--x"}, filepath.Join(rootfs, "second")},
		{[]string{"/missing"}, filepath.Join(rootfs, "missing")},
	} {
		if got := x.binary(c.command); got != c.want {
			t.Errorf("command %q runs %s, want %s", c.command, got, c.want)
		}
	}
	if got := (execImage{path: "/p"}).binary([]string{"/other"}); got != "/p" {
		t.Errorf("a plain PATH ran %s for a command, want /p", got)
	}
}

// execTestImage is the image the tests map to their own binary.
const execTestImage = "example.test/exectest"

// etStart runs the fake kubelet against a fake API whose TokenRequest answers tok-N, with
// execTestImage mapped to this test binary and short back-offs.
func etStart(t *testing.T) (*fake.Clientset, *kubelet, context.Context) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("not used: the child only dials with EXEC_TEST_RBAC\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	tokens := 0
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tokens++
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: "tok-" + strconv.Itoa(tokens), ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}}, nil
	})
	// Registered first, so it runs after the kubelet's own cleanup: a pod worker may still be
	// writing a run's files as it winds down (seen once on a loaded machine: TempDir's
	// RemoveAll found the pod's directory refilled); the directory is gone before TempDir's
	// own cleanup runs.
	t.Cleanup(func() {
		exec := filepath.Join(dir, "exec")
		deadline := time.Now().Add(5 * time.Second)
		for err := os.RemoveAll(exec); err != nil && time.Now().Before(deadline); err = os.RemoveAll(exec) {
			time.Sleep(50 * time.Millisecond) // poll interval
		}
	})
	cfg := kubeletConfig{serve: true, crashBackoffInitial: 300 * time.Millisecond, crashBackoffMax: 600 * time.Millisecond,
		crashRun: time.Second, terminatedFor: 100 * time.Millisecond,
		execImages: execImages{{prefix: execTestImage, path: self}}, apiServer: "https://127.0.0.1:1", caFile: ca, execDir: filepath.Join(dir, "exec")}
	k := oneNodeKubelet(t, ctx, cancel, client, cfg, 202)
	return client, k, ctx
}

func etPod(name string, env ...v1.EnvVar) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			NodeName:      nodeName(0),
			RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{
				Name:    "app",
				Image:   execTestImage + ":v1",
				Command: []string{"/exectest", "serve"},
				Args:    []string{"--name=$(POD_NAME)", "--ip=$(POD_IP)"},
				Env: append([]v1.EnvVar{
					{Name: "EXEC_TEST_CHILD", Value: "1"},
					{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				}, env...),
			}},
		},
	}
}

func etStatus(ctx context.Context, client kubernetes.Interface, name string) (*v1.Pod, *v1.ContainerStatus) {
	p, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) != 1 {
		return p, nil
	}
	return p, &p.Status.ContainerStatuses[0]
}

func etLog(t *testing.T, k *kubelet, pod *v1.Pod, previous bool) string {
	t.Helper()
	return etRun(t, k, pod, previous).Render(proc.LogOptions{TailLines: -1})
}

// etRun is a run's log, which stays readable here after the pod's deletion drops it.
func etRun(t *testing.T, k *kubelet, pod *v1.Pod, previous bool) *proc.Log {
	t.Helper()
	id, err := containerLogID(pod, "app", previous)
	if err != nil {
		t.Fatal(err)
	}
	run := k.logRun(id)
	if run == nil {
		t.Fatalf("no log for %s", id)
	}
	return run.log
}

// etPid is the pid the child printed.
func etPid(t *testing.T, log string) int {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if s, ok := strings.CutPrefix(l, "pid="); ok {
			pid, _ := strconv.Atoi(s)
			return pid
		}
	}
	t.Fatalf("no pid in log:\n%s", log)
	return 0
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func etEventually(t *testing.T, what string, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for state
	}
	t.Fatalf("%s: not within %s; last: %s", what, within, last)
}

// TestExecImageRunsProcess: a pod of an exec image runs the binary with the composed argv and
// environment, becomes Running and Ready through real probes (startup httpGet, readiness grpc
// with a service, liveness tcpSocket), its output is its log, and deleting it SIGTERMs it.
func TestExecImageRunsProcess(t *testing.T) {
	client, k, ctx := etStart(t)
	pod := etPod("p1")
	svc := "exectest"
	c := &pod.Spec.Containers[0]
	c.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1, FailureThreshold: 30}
	c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Service: &svc}}, PeriodSeconds: 1}
	c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p *v1.Pod
	etEventually(t, "Running and Ready", 15*time.Second, func() (bool, string) {
		var cs *v1.ContainerStatus
		p, cs = etStatus(ctx, client, "p1")
		if cs == nil {
			return false, "no status"
		}
		return p.Status.Phase == v1.PodRunning && cs.Ready && cs.State.Running != nil, fmt.Sprintf("%s %+v", p.Status.Phase, cs.State)
	})
	log := etLog(t, k, p, false)
	self, _ := os.Executable()
	kc := filepath.Join(k.cfg.execDir, "uid-p1", "kubeconfig")
	for _, want := range []string{
		fmt.Sprintf("args=%q", []string{self, "serve", "--name=p1", "--ip=127.202.0.1"}),
		"env LOCALCLUSTER_POD_IP=127.202.0.1",
		"env KUBECONFIG=" + kc,
		"env POD_NAME=p1",
		"env HOSTNAME=p1",
		"listening on 127.202.0.1:8080 and 127.202.0.1:9090",
	} {
		if !strings.Contains(log, want+"\n") {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	b, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	ai := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	tok, _ := os.ReadFile(ai.TokenFile)
	if string(tok) != "tok-1" || cfg.Contexts[cfg.CurrentContext].Namespace != "ns" || cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server != "https://127.0.0.1:1" {
		t.Errorf("kubeconfig: token %q, %s", tok, b)
	}
	pid := etPid(t, log)
	if !alive(pid) {
		t.Fatalf("process %d not running", pid)
	}
	runLog := etRun(t, k, p, false)
	// The graceful deletion a real API server does: deletionTimestamp first, then the kubelet
	// stops the containers and deletes with grace 0.
	now := metav1.Now()
	grace := int64(5)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err := client.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	etEventually(t, "process gone after SIGTERM", 5*time.Second, func() (bool, string) { return !alive(pid), "alive" })
	// The log is copied from the process's pipe on its own goroutine: its last line may land
	// just after the process is gone.
	etEventually(t, "SIGTERM in the log", 5*time.Second, func() (bool, string) {
		l := runLog.Render(proc.LogOptions{TailLines: -1})
		return strings.Contains(l, "got SIGTERM, exiting\n"), l
	})
	etEventually(t, "pod deleted", 5*time.Second, func() (bool, string) {
		_, err := client.CoreV1().Pods("ns").Get(ctx, "p1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestExecImageCrashLoop: a process that exits 3 is terminated Error, restarts through
// CrashLoopBackOff with a growing restartCount, and --previous shows the last run's output.
func TestExecImageCrashLoop(t *testing.T) {
	client, k, ctx := etStart(t)
	pod := etPod("crash", v1.EnvVar{Name: "EXEC_TEST_EXIT_AFTER", Value: "200ms"})
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sawBackOff := false
	var p *v1.Pod
	etEventually(t, "two restarts", 20*time.Second, func() (bool, string) {
		var cs *v1.ContainerStatus
		p, cs = etStatus(ctx, client, "crash")
		if cs == nil {
			return false, "no status"
		}
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		lt := cs.LastTerminationState.Terminated
		return cs.RestartCount >= 2 && sawBackOff && lt != nil && lt.ExitCode == 3 && lt.Reason == "Error",
			fmt.Sprintf("restarts %d backoff %v last %+v", cs.RestartCount, sawBackOff, lt)
	})
	prev := etLog(t, k, p, true)
	if !strings.Contains(prev, "crashing with exit code 3\n") || !strings.Contains(prev, "pid=") {
		t.Errorf("previous log:\n%s", prev)
	}
	if !strings.Contains(ckEvents(ctx, client, "crash"), "Warning BackOff Back-off restarting failed container app") {
		t.Errorf("events:\n%s", ckEvents(ctx, client, "crash"))
	}
}

// TestExecImageKilledAfterGrace: a process that ignores SIGTERM is killed when the deletion's
// grace period is over, and the pod goes only then.
func TestExecImageKilledAfterGrace(t *testing.T) {
	client, k, ctx := etStart(t)
	pod := etPod("stubborn", v1.EnvVar{Name: "EXEC_TEST_IGNORE_TERM", Value: "1"})
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p *v1.Pod
	etEventually(t, "running", 15*time.Second, func() (bool, string) {
		var cs *v1.ContainerStatus
		p, cs = etStatus(ctx, client, "stubborn")
		return cs != nil && cs.Ready && strings.Contains(etLog(t, k, p, false), "listening on"), fmt.Sprint(cs)
	})
	runLog := etRun(t, k, p, false)
	pid := etPid(t, runLog.Render(proc.LogOptions{TailLines: -1}))
	now := metav1.Now()
	grace := int64(1)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	start := time.Now()
	if _, err := client.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	etEventually(t, "SIGTERM ignored", 5*time.Second, func() (bool, string) {
		return strings.Contains(runLog.Render(proc.LogOptions{TailLines: -1}), "got SIGTERM, ignoring it"), "no SIGTERM yet"
	})
	if _, err := client.CoreV1().Pods("ns").Get(ctx, "stubborn", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod gone while its process runs: %v", err)
	}
	etEventually(t, "killed", 5*time.Second, func() (bool, string) { return !alive(pid), "alive" })
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("killed after %s, before the 1s grace period", d)
	}
	etEventually(t, "pod deleted", 5*time.Second, func() (bool, string) {
		_, err := client.CoreV1().Pods("ns").Get(ctx, "stubborn", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestExecImageOnLocalCluster runs the real localcluster binary with --exec-image: the process
// uses its kubeconfig with exactly its ServiceAccount's RBAC, its log comes through pods/log,
// and stopping the cluster leaves none of its processes (the child and the one it started).
func TestExecImageOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the localcluster binary")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "localcluster")
	ldflags, err := os.ReadFile("ldflags")
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-ldflags", strings.Join(strings.Fields(string(ldflags)), " "), "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "--data-dir", data, "--nodes", "1", "--exec-image", execTestImage+"="+self)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "localcluster ready") {
				ready <- sc.Text()
			}
		}
		exited <- cmd.Wait()
	}()
	defer func() { _ = cmd.Process.Kill() }()
	tail := func() string { b, _ := os.ReadFile(stderr.Name()); return string(b[max(0, len(b)-4000):]) }
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("localcluster exited: %v\n%s", err, tail())
	case <-time.After(120 * time.Second):
		t.Fatalf("no ready line\n%s", tail())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(data, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	const ns = "exec"
	mustCreate := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}}}, metav1.CreateOptions{})
	mustCreate(err)
	marker := fmt.Sprintf("--marker=kexec-%d-%d", os.Getpid(), time.Now().UnixNano())
	pod := etPod("rbac",
		v1.EnvVar{Name: "EXEC_TEST_RBAC", Value: "1"},
		v1.EnvVar{Name: "EXEC_TEST_SPAWN", Value: "1"},
		v1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	pod.Namespace, pod.UID, pod.Spec.NodeName = ns, "", ""
	pod.Spec.ServiceAccountName = "reader"
	pod.Spec.Containers[0].Args = append(pod.Spec.Containers[0].Args, marker)
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	mustCreate(err)
	etEventually(t, "Running and Ready", 60*time.Second, func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "rbac", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			return false, fmt.Sprint(err)
		}
		c := p.Status.ContainerStatuses[0]
		return c.Ready, fmt.Sprintf("%s %+v", p.Status.Phase, c.State)
	})
	var log string
	etEventually(t, "log through pods/log", 10*time.Second, func() (bool, string) {
		b, err := cs.CoreV1().Pods(ns).GetLogs("rbac", &v1.PodLogOptions{}).DoRaw(ctx)
		log = string(b)
		return err == nil && strings.Contains(log, "rbac ok: pods listed, secrets forbidden\n") && strings.Contains(log, "grandchild="), fmt.Sprint(err, log)
	})
	pgrep := func() string {
		out, _ := exec.Command("pgrep", "-f", "--", marker).Output()
		return strings.TrimSpace(string(out))
	}
	if pids := strings.Fields(pgrep()); len(pids) != 2 {
		t.Fatalf("want the child and the grandchild running, pgrep: %q", pids)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("localcluster exit: %v\n%s", err, tail())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("localcluster did not exit\n%s", tail())
	}
	if left := pgrep(); left != "" {
		t.Fatalf("processes outlived the cluster: %s", left)
	}
}
