package vllm

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

const (
	rayLeaderScript = "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader --ray_cluster_size=2 && exec vllm serve 'Qwen/Qwen3-8B' --port 8000 --served-model-name 'qwen' --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray"
	rayWorkerScript = "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker --ray_address=big-0.big.ns"
)

func TestParseRayLaunch(t *testing.T) {
	sh := []string{"/bin/sh", "-c"}
	for _, tc := range []struct {
		name          string
		command, args []string
		ok            bool
		want          rayLaunch
	}{
		{"leader then vllm serve", sh, []string{rayLeaderScript}, true, rayLaunch{role: "leader", clusterSize: "2", port: "6379", initTimeout: 300,
			then: []string{"vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000", "--served-model-name", "qwen", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "--distributed-executor-backend", "ray"}}},
		{"worker", sh, []string{rayWorkerScript}, true, rayLaunch{role: "worker", address: "big-0.big.ns", port: "6379", initTimeout: 300}},
		{"another path, port, timeout, ray args", []string{"bash", "-c", "/opt/multi-node-serving.sh worker --ray_address=h --ray_port=6380 --ray_init_timeout=60 --num-gpus=8"}, nil, true,
			rayLaunch{role: "worker", address: "h", port: "6380", initTimeout: 60, startParams: []string{"--num-gpus=8"}}},
		{"the script as the command", []string{"./multi-node-serving.sh"}, []string{"leader", "--ray_cluster_size=4"}, true, rayLaunch{role: "leader", clusterSize: "4", port: "6379", initTimeout: 300}},
		{"a timeout bash reads as 0", sh, []string{"bash multi-node-serving.sh worker --ray_address=h --ray_init_timeout=abc"}, true, rayLaunch{role: "worker", address: "h", port: "6379"}},
		{"a variable the kubelet did not expand", sh, []string{"bash multi-node-serving.sh worker --ray_address=$(LWS_LEADER_ADDRESS)"}, true,
			rayLaunch{role: "worker", port: "6379", initTimeout: 300, shellErrors: []string{"sh: 1: LWS_LEADER_ADDRESS: not found"}}},
		{"a quoted && is an argument", sh, []string{"bash multi-node-serving.sh leader '&&' --ray_cluster_size=2"}, true, rayLaunch{role: "leader", clusterSize: "2", port: "6379", initTimeout: 300, startParams: []string{"&&"}}},
		{"unknown subcommand", sh, []string{"bash multi-node-serving.sh head"}, true, rayLaunch{role: "head", port: "6379", initTimeout: 300}},
		{"vllm serve alone", sh, []string{"exec vllm serve m"}, false, rayLaunch{}},
		{"another script", sh, []string{"bash /start.sh leader"}, false, rayLaunch{}},
		{"no command", nil, []string{"m"}, false, rayLaunch{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseRayLaunch(tc.command, tc.args)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if got.role != tc.want.role || got.clusterSize != tc.want.clusterSize || got.address != tc.want.address ||
				got.port != tc.want.port || got.initTimeout != tc.want.initTimeout || !slices.Equal(got.startParams, tc.want.startParams) ||
				!slices.Equal(got.then, tc.want.then) || !slices.Equal(got.shellErrors, tc.want.shellErrors) {
				t.Errorf("got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func TestClusterReady(t *testing.T) {
	for _, tc := range []struct {
		active int
		size   string
		want   bool
	}{
		{1, "2", false}, {2, "2", true}, {3, "2", false}, {1, "1", true}, {2, "two", false}, {2, "", false},
	} {
		if got := clusterReady(tc.active, tc.size); got != tc.want {
			t.Errorf("clusterReady(%d, %q) = %v, want %v", tc.active, tc.size, got, tc.want)
		}
	}
}

// rayWorld is a Ray registry and the cluster DNS of namespace ns, where LeaderWorkerSet big's
// headless Service (subdomain policy Shared) selects its pods.
type rayWorld struct {
	rc  *RayCluster
	dns *fakeDNS
}

func newRayWorld(headless bool) rayWorld {
	return rayWorld{rc: NewRayCluster(), dns: &fakeDNS{headless: headless, names: map[string]string{}}}
}

// fakeDNS is the cluster DNS as the group's processes meet it: a pod of the LeaderWorkerSet
// big resolves as POD.big.ns when its headless Service exists (the kubelet's DNS server and its
// Services are clusterdns.go's, tested there).
type fakeDNS struct {
	mu       sync.Mutex
	headless bool
	names    map[string]string
}

func (d *fakeDNS) addPod(pod, ip string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.headless {
		d.names[pod+".big.ns"] = ip
	}
}

func (d *fakeDNS) Lookup(_ context.Context, name string) (string, error) {
	if ip := net.ParseIP(name); ip != nil {
		return ip.String(), nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ip, ok := d.names[name]; ok {
		return ip, nil
	}
	return "", errNoResolver
}

// rayPod starts one pod's process of group big/0; a leader's pod is in DNS first, under the
// subdomain big, as LWS's pod webhook sets it.
func rayPod(t *testing.T, w rayWorld, pod, worker, script string, gpus int) (*Server, *proc.Log, string) {
	t.Helper()
	return rayGroupPod(t, w, pod, "0", worker, script, gpus)
}

func rayGroupPod(t *testing.T, w rayWorld, pod, group, worker, script string, gpus int) (*Server, *proc.Log, string) {
	t.Helper()
	ip := vtIP()
	if worker == "0" {
		w.dns.addPod(pod, ip)
	}
	return vtStart(t, proc.Spec{Image: "vllm/vllm-openai:v0.11.0", Command: []string{"/bin/sh", "-c"}, Args: []string{script}, GPUs: gpus, IP: ip,
		Ray: proc.LWSMember{Namespace: "ns", Name: "big", Group: group, Worker: worker, Pod: pod}, DNS: w.dns}, Config{Ray: w.rc})
}

// waitLog polls the log for want.
func waitLog(t *testing.T, log *proc.Log, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.Render(proc.LogOptions{TailLines: -1}), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log lacks %q:\n%s", want, log.Render(proc.LogOptions{TailLines: 30}))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dials(url string) bool {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

func TestRayGroupLeaderWaitsForWorker(t *testing.T) {
	rc := newRayWorld(true)
	leader, llog, url := rayPod(t, rc, "big-0", "0", rayLeaderScript, 8)
	waitLog(t, llog, "Wait for all ray workers to be active. 1/2 is active")
	if dials(url) {
		t.Fatal("the leader's port is open before its worker joined")
	}
	worker, wlog, _ := rayPod(t, rc, "big-0-1", "1", rayWorkerScript, 8)
	waitLog(t, wlog, "Ray runtime started.")
	waitLog(t, llog, "All ray workers are active and the ray cluster is initialized successfully.")
	waitLog(t, llog, "Application startup complete.")
	if !dials(url) {
		t.Fatal("the leader does not serve once its worker joined")
	}
	if out := llog.Render(proc.LogOptions{TailLines: -1}); strings.Contains(out, "exceeds") {
		t.Fatalf("tp 8 x pp 2 must fit the cluster's 16 GPUs:\n%s", out)
	}
	// the worker goes: the engine's actors on it die, the leader exits 1
	worker.Stop()
	select {
	case st := <-leader.Exited():
		if st.Code != 1 {
			t.Errorf("leader exit %+v, want 1", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leader lives on without its worker")
	}
	waitLog(t, llog, "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.")
	waitLog(t, llog, "EngineDeadError")
}

func TestRayGroupTooFewGPUs(t *testing.T) {
	rc := newRayWorld(true)
	leader, llog, _ := rayPod(t, rc, "big-0", "0", rayLeaderScript, 8)
	rayPod(t, rc, "big-0-1", "1", rayWorkerScript, 4)
	select {
	case st := <-leader.Exited():
		if st.Code != 1 {
			t.Errorf("exit %+v", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("16 GPUs on a 12-GPU Ray cluster must fail")
	}
	waitLog(t, llog, "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.")
	if strings.Contains(llog.Render(proc.LogOptions{TailLines: -1}), "Started a local Ray instance.") {
		t.Error("on the group's cluster vLLM connects to it, it starts no local Ray")
	}
}

func TestRayTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name, script, worker string
		want                 []string
	}{
		{"worker without a leader", "bash multi-node-serving.sh worker --ray_address=big-0.big.ns --ray_init_timeout=0", "1",
			[]string{"Waiting until the ray worker is active...", "Ray worker starts timeout, head address: big-0.big.ns:6379"}},
		{"leader without workers", "bash multi-node-serving.sh leader --ray_cluster_size=2 --ray_init_timeout=0 && exec vllm serve m", "0",
			[]string{"Ray runtime started.", "Waiting for all ray workers to be active timed out."}},
		{"leader without a size", "bash multi-node-serving.sh leader", "0", []string{"Error: Missing argument --ray_cluster_size"}},
		{"worker without an address", "bash multi-node-serving.sh worker", "1", []string{"Error: Missing argument --ray_address"}},
		{"unknown subcommand", "bash multi-node-serving.sh head", "0", []string{"unknown subcommand: head"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, log, _ := rayPod(t, newRayWorld(true), "p", tc.worker, tc.script, 8)
			if st := vtExit(t, s, log); st.Code != 1 {
				t.Errorf("exit %+v, want 1", st)
			}
			for _, w := range tc.want {
				waitLog(t, log, w)
			}
		})
	}
}

func TestRayWorkerJoinsLeaderThatComesLater(t *testing.T) {
	rc := newRayWorld(true)
	_, wlog, _ := rayPod(t, rc, "big-0-1", "1", rayWorkerScript, 8)
	waitLog(t, wlog, "Waiting until the ray worker is active...")
	// another group's leader is not this worker's
	rayGroupPod(t, rc, "big-1", "1", "0", rayLeaderScript, 8)
	_, llog, _ := rayPod(t, rc, "big-0", "0", rayLeaderScript, 8)
	waitLog(t, wlog, "Ray runtime started.")
	waitLog(t, llog, "Application startup complete.")
}

// A real cluster's defect: the LeaderWorkerSet's name already held by a ClusterIP Service, LWS
// creates no headless Service, the leader's name does not resolve and the worker never joins
// the head that is up and waiting for it.
func TestRayWorkerCannotResolveLeaderUnderClusterIPService(t *testing.T) {
	rc := newRayWorld(false)
	_, llog, _ := rayPod(t, rc, "big-0", "0", rayLeaderScript, 8)
	waitLog(t, llog, "Wait for all ray workers to be active. 1/2 is active")
	s, wlog, _ := rayPod(t, rc, "big-0-1", "1", "bash multi-node-serving.sh worker --ray_address=big-0.big.ns --ray_init_timeout=0", 8)
	if st := vtExit(t, s, wlog); st.Code != 1 {
		t.Errorf("exit %+v, want 1", st)
	}
	waitLog(t, wlog, "Ray worker starts timeout, head address: big-0.big.ns:6379")
	if strings.Contains(wlog.Render(proc.LogOptions{TailLines: -1}), "Ray runtime started.") {
		t.Error("the worker joined a head its address does not resolve to")
	}
}
