package sglang

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// fakeDNS is the cluster DNS as a group's processes meet it: the leader's pod resolves as
// big-0.big.ns once it is added (the kubelet's DNS server is clusterdns.go's, tested there).
type fakeDNS struct {
	mu    sync.Mutex
	names map[string]string
}

func (d *fakeDNS) add(name, ip string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.names[name] = ip
}

func (d *fakeDNS) Lookup(_ context.Context, name string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ip, ok := d.names[name]; ok {
		return ip, nil
	}
	return "", errors.New("Name or service not known")
}

// groupScript is the operator's MultiNode script for rank (controller/engine/sglang), as the
// kubelet hands it after expanding LWS's variables: Qwen3-8B over two nodes of one GPU each.
func groupScript(rank, timeout string) string {
	return "exec python3 -m sglang.launch_server '--model-path' 'Qwen/Qwen3-8B' '--served-model-name' 'qwen' '--host' '0.0.0.0' " +
		"'--port' '8000' '--enable-metrics' '--tp-size' '2' --nnodes 2 --dist-init-addr big-0.big.ns:20000 --dist-timeout " + timeout +
		" --node-rank " + rank
}

func groupPod(t *testing.T, dns *fakeDNS, rank, timeout string, cfg Config) (*Server, *proc.Log, string) {
	t.Helper()
	ip := stIP()
	if rank == "0" {
		dns.add("big-0.big.ns", ip)
	}
	return stStart(t, proc.Spec{Command: []string{"/bin/sh", "-c"}, Args: []string{groupScript(rank, timeout)}, IP: ip, DNS: dns, GPUs: 1}, cfg)
}

func waitLog(t *testing.T, log *proc.Log, want string) {
	t.Helper()
	poll(t, "log line "+want, func() (bool, string) {
		return strings.Contains(logText(log), want), log.Render(proc.LogOptions{TailLines: 20})
	})
}

// TestSGLangGroupFormsThenLosesANode: the leader listens for the rendezvous and keeps its HTTP
// port closed until the worker, finding it through the DNS, joined; then the group serves
// (the worker answers /health on its own port); a node lost kills the other's scheduler in
// NCCL's words.
func TestSGLangGroupFormsThenLosesANode(t *testing.T) {
	dns := &fakeDNS{names: map[string]string{}}
	cfg := Config{TokenTime: time.Millisecond}
	leader, llog, lurl := groupPod(t, dns, "0", "60", cfg)
	waitLog(t, llog, " TP0] Init torch distributed begin.")
	if !dialable(strings.TrimPrefix(lurl, "http://")[:strings.LastIndex(strings.TrimPrefix(lurl, "http://"), ":")] + ":20000") {
		t.Fatal("the leader does not listen for the rendezvous")
	}
	if dialable(strings.TrimPrefix(lurl, "http://")) || strings.Contains(logText(llog), "Init torch distributed ends") {
		t.Fatalf("the leader went on alone:\n%s", logText(llog))
	}
	worker, wlog, wurl := groupPod(t, dns, "1", "60", cfg)
	waitLog(t, wlog, " TP1] Init torch distributed ends.")
	ready(t, lurl, llog)
	if code, body := call("POST", lurl+"/v1/completions", `{"prompt":"a b","max_tokens":2}`); code != 200 {
		t.Fatalf("completion %d %s", code, body)
	}
	if code, _ := call("GET", wurl+"/health", ""); code != 200 {
		t.Fatalf("the worker's health server: %d", code)
	}
	if code, _ := call("GET", wurl+"/v1/models", ""); code != 404 {
		t.Fatalf("the worker serves the API: %d", code)
	}
	if strings.Contains(logText(wlog), "Uvicorn running") || strings.Contains(logText(wlog), "fired up") {
		t.Fatalf("the worker logged the HTTP server:\n%s", logText(wlog))
	}
	worker.Stop()
	st := stExit(t, leader, llog)
	if st.Code != 0 || !strings.Contains(logText(llog), "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.") ||
		!strings.Contains(logText(llog), "Received sigquit from a child process. It usually means the child failed.") {
		t.Fatalf("exit %+v\n%s", st, logText(llog))
	}
}

// TestSGLangGroupTimeouts: a leader whose worker never comes, a worker whose leader never
// resolves, each fails at --dist-timeout in torch.distributed's words.
func TestSGLangGroupTimeouts(t *testing.T) {
	dns := &fakeDNS{names: map[string]string{}}
	leader, llog, _ := groupPod(t, dns, "0", "1", Config{})
	if st := stExit(t, leader, llog); st.Code != 0 ||
		!strings.Contains(logText(llog), "torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 1/2 clients joined.") {
		t.Fatalf("leader: %+v\n%s", st, logText(llog))
	}
	lonely := &fakeDNS{names: map[string]string{}}
	worker, wlog, _ := groupPod(t, lonely, "1", "1", Config{})
	st := stExit(t, worker, wlog)
	text := logText(wlog)
	if st.Code != 0 || !strings.Contains(text, "[c10d] The IPv4 network addresses of (big-0.big.ns, 20000) cannot be retrieved (gai error: -2 - Name or service not known).") ||
		!strings.Contains(text, "torch.distributed.DistNetworkError: The client socket has timed out after 1000ms while trying to connect to (big-0.big.ns, 20000).") {
		t.Fatalf("worker: %+v\n%s", st, text)
	}
}

// resetAll is a NetworkPolicy admitting nothing: every connection is reset.
type resetAll struct{}

func (resetAll) Guard(l net.Listener) net.Listener { return refusing{l} }
func (resetAll) AdmitsPeer(string, string, string, int32) (bool, string) {
	return false, "no policy admits it"
}

type refusing struct{ net.Listener }

func (r refusing) Accept() (net.Conn, error) {
	for {
		c, err := r.Listener.Accept()
		if err != nil {
			return nil, err
		}
		_ = c.Close()
	}
}

// TestSGLangGroupBehindAPolicy: a NetworkPolicy on the leader's pod that admits no worker keeps
// the group from forming: the worker's connections are reset until its timeout.
func TestSGLangGroupBehindAPolicy(t *testing.T) {
	dns := &fakeDNS{names: map[string]string{}}
	groupPod(t, dns, "0", "60", Config{Ingress: resetAll{}})
	worker, wlog, _ := groupPod(t, dns, "1", "1", Config{})
	st := stExit(t, worker, wlog)
	if text := logText(wlog); st.Code != 0 || !strings.Contains(text, "[c10d] The client socket has failed to connect to [big-0.big.ns]:20000 (errno: 104 - Connection reset by peer).") ||
		!strings.Contains(text, "The client socket has timed out after 1000ms") {
		t.Fatalf("worker: %+v\n%s", st, text)
	}
}

// TestSGLangGroupUnexpandedVariable: a variable the kubelet could not expand is a command
// substitution sh runs and reports; its value is gone, which argparse refuses.
func TestSGLangGroupUnexpandedVariable(t *testing.T) {
	s, log, _ := stStart(t, proc.Spec{Command: []string{"/bin/sh", "-c"},
		Args: []string{"exec python3 -m sglang.launch_server '--model-path' 'm' --nnodes $(LWS_GROUP_SIZE) --node-rank 0"}}, Config{})
	st := stExit(t, s, log)
	text := logText(log)
	if st.Code != 2 || !strings.HasPrefix(text, "sh: 1: LWS_GROUP_SIZE: not found\nusage: launch_server.py") ||
		!strings.HasSuffix(text, "launch_server.py: error: argument --nnodes: expected one argument\n") {
		t.Fatalf("exit %+v\n%s", st, text)
	}
}
