package main

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
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

func TestExpandCommand(t *testing.T) {
	env := map[string]string{"LWS_GROUP_SIZE": "2", "LWS_LEADER_ADDRESS": "big-0.big.ns", "EMPTY": ""}
	for _, tc := range []struct{ in, want string }{
		{"--ray_cluster_size=$(LWS_GROUP_SIZE)", "--ray_cluster_size=2"},
		{"--ray_address=$(LWS_LEADER_ADDRESS)", "--ray_address=big-0.big.ns"},
		{"$$(LWS_GROUP_SIZE) is escaped", "$(LWS_GROUP_SIZE) is escaped"},
		{"$(MISSING) stays", "$(MISSING) stays"},
		{"$(EMPTY)x", "x"},
		{"$LWS_GROUP_SIZE is the shell's", "$LWS_GROUP_SIZE is the shell's"},
		{"$$ and $", "$ and $"},
		{"unclosed $(LWS_GROUP_SIZE", "unclosed $(LWS_GROUP_SIZE"},
	} {
		if got := expandCommand([]string{tc.in}, env); got[0] != tc.want {
			t.Errorf("expand %q = %q, want %q", tc.in, got[0], tc.want)
		}
	}
	if expandCommand(nil, env) != nil {
		t.Error("nil command must stay nil (the image's entrypoint)")
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
	rc  *rayCluster
	dns *testDNS
}

func newRayWorld(t *testing.T, svcs ...*v1.Service) rayWorld {
	if svcs == nil {
		svcs = []*v1.Service{headless("ns", "big", map[string]string{lwsNameLabel: "big"}, true)}
	}
	return rayWorld{rc: newRayCluster(), dns: startTestDNS(t, svcs...)}
}

// rayPod starts one pod's process of group big/0; a leader's pod is in DNS first, under the
// subdomain big, as LWS's pod webhook sets it.
func rayPod(t *testing.T, w rayWorld, pod, worker, script string, gpus int) (*modelServer, *containerLog, string) {
	t.Helper()
	return rayGroupPod(t, w, pod, "0", worker, script, gpus)
}

func rayGroupPod(t *testing.T, w rayWorld, pod, group, worker, script string, gpus int) (*modelServer, *containerLog, string) {
	t.Helper()
	ip := vtIP()
	if worker == "0" {
		w.dns.addPod(t, dnsPod("ns", pod, pod, "big", ip, false, map[string]string{lwsNameLabel: "big", lwsGroupLabel: group}))
	}
	return vtStart(t, modelServerSpec{Image: "vllm/vllm-openai:v0.11.0", Command: []string{"/bin/sh", "-c"}, Args: []string{script}, GPUs: gpus, IP: ip,
		Ray: rayMember{Namespace: "ns", Name: "big", Group: group, Worker: worker, Pod: pod}, DNS: w.dns.resolver("ns")}, serverConfig{Ray: w.rc})
}

// waitLog polls the log for want.
func waitLog(t *testing.T, log *containerLog, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.Render(logOptions{TailLines: -1}), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log lacks %q:\n%s", want, log.Render(logOptions{TailLines: 30}))
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
	rc := newRayWorld(t)
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
	if out := llog.Render(logOptions{TailLines: -1}); strings.Contains(out, "exceeds") {
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
	rc := newRayWorld(t)
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
	if strings.Contains(llog.Render(logOptions{TailLines: -1}), "Started a local Ray instance.") {
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
			s, log, _ := rayPod(t, newRayWorld(t), "p", tc.worker, tc.script, 8)
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
	rc := newRayWorld(t)
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
	rc := newRayWorld(t, clusterIPService("ns", "big", "10.0.0.4", map[string]string{lwsNameLabel: "big"}))
	_, llog, _ := rayPod(t, rc, "big-0", "0", rayLeaderScript, 8)
	waitLog(t, llog, "Wait for all ray workers to be active. 1/2 is active")
	s, wlog, _ := rayPod(t, rc, "big-0-1", "1", "bash multi-node-serving.sh worker --ray_address=big-0.big.ns --ray_init_timeout=0", 8)
	if st := vtExit(t, s, wlog); st.Code != 1 {
		t.Errorf("exit %+v, want 1", st)
	}
	waitLog(t, wlog, "Ray worker starts timeout, head address: big-0.big.ns:6379")
	if strings.Contains(wlog.Render(logOptions{TailLines: -1}), "Ray runtime started.") {
		t.Error("the worker joined a head its address does not resolve to")
	}
}
