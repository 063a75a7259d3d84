// Multi-node groups (a LeaderWorkerSet's pods) running vLLM's documented multi-node launch,
// examples/online_serving/multi-node-serving.sh: the Ray cluster a group's processes form, as
// far as they can tell. A worker's `multi-node-serving.sh worker` joins the Ray head of its
// group's leader at the address LWS_LEADER_ADDRESS resolves to through the cluster DNS
// (the kubelet's clusterdns.go); the leader's `multi-node-serving.sh leader` starts the head and blocks until
// the cluster has its size, then `exec vllm serve` runs the fake vLLM server on the cluster's
// GPUs. Waits are on the registry's change channels, and a worker's on Ray's 5 s retry too (a
// name that does not resolve yet announces nothing).

package vllm

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

const (
	rayScript             = "multi-node-serving.sh"
	rayDefaultPort        = "6379"
	rayDefaultInitTimeout = 300 // seconds, the script's ray_init_timeout
	// rayRetry is the script's `sleep 5s` between attempts; its loop counts 5 per attempt.
	rayRetry = 5 * time.Second
)

// rayLaunch is a container's multi-node-serving.sh invocation, parsed as the script parses it.
type rayLaunch struct {
	role        string // "leader", "worker", or what else was given (the script refuses it)
	clusterSize string // leader: --ray_cluster_size=, "" missing
	address     string // worker: --ray_address=, "" missing
	port        string // --ray_port=
	initTimeout int    // --ray_init_timeout= in seconds; bash arithmetic: a non-number is 0
	startParams []string
	// then is what the shell runs after the script succeeds (`&& exec vllm serve ...`); nil:
	// nothing, the container completes.
	then []string
	// shellErrors are the shell's complaints about `$(NAME)` left unexpanded by the kubelet
	// (no such variable): the shell runs it as a command substitution, which is not found.
	shellErrors []string
}

// commandSubst is a `$(...)` the kubelet left in place because no variable has that name.
var commandSubst = regexp.MustCompile(`\$\(([^()]*)\)`)

// parseRayLaunch recognises the script in a container's command and args: `sh -c "bash
// <path>/multi-node-serving.sh leader|worker [--ray_*=...] [&& exec vllm serve ...]"`, or the
// script run directly. Any path to the script counts.
func parseRayLaunch(command, args []string) (*rayLaunch, bool) {
	full := append(append([]string(nil), command...), args...)
	if len(full) == 0 {
		return nil, false
	}
	lists := [][]string{full}
	if b := base(full[0]); (b == "sh" || b == "bash") && len(full) >= 3 && full[1] == "-c" {
		lists = proc.ShellLists(full[2])
	}
	if len(lists) == 0 {
		return nil, false
	}
	words := lists[0]
	if len(words) > 0 && (base(words[0]) == "bash" || base(words[0]) == "sh") {
		words = words[1:]
	}
	if len(words) == 0 || base(words[0]) != rayScript {
		return nil, false
	}
	l := &rayLaunch{port: rayDefaultPort, initTimeout: rayDefaultInitTimeout}
	if len(lists) > 1 {
		l.then = lists[1]
	}
	for i, w := range words[1:] {
		for _, m := range commandSubst.FindAllStringSubmatch(w, -1) {
			l.shellErrors = append(l.shellErrors, fmt.Sprintf("sh: 1: %s: not found", m[1]))
		}
		w = commandSubst.ReplaceAllString(w, "")
		if i == 0 {
			l.role = w
			continue
		}
		name, val, _ := strings.Cut(w, "=")
		switch {
		case name == "--ray_port" && strings.Contains(w, "="):
			l.port = val
		case name == "--ray_init_timeout" && strings.Contains(w, "="):
			l.initTimeout, _ = strconv.Atoi(val)
		case name == "--ray_cluster_size" && strings.Contains(w, "=") && l.role == "leader":
			l.clusterSize = val
		case name == "--ray_address" && strings.Contains(w, "=") && l.role == "worker":
			l.address = val
		default:
			l.startParams = append(l.startParams, w)
		}
	}
	return l, true
}

// budget is how long the script's `for (( i=0; i < timeout; i+=5 ))` loop sleeps in all.
func (l *rayLaunch) budget() time.Duration {
	if l.initTimeout <= 0 {
		return 0
	}
	return time.Duration((l.initTimeout+4)/5) * rayRetry
}

// key is the member's group; ok false: the pod carries no LWS labels (no group to find).
func groupKey(m proc.LWSMember) (rayGroupKey, bool) {
	return rayGroupKey{m.Namespace, m.Name, m.Group}, m.Name != "" && m.Group != ""
}

type rayGroupKey struct{ namespace, name, group string }

// RayCluster is every group's Ray cluster on this kubelet's nodes: the group's processes find
// each other here as real ones do over the network.
type RayCluster struct {
	mu     sync.Mutex
	groups map[rayGroupKey]*rayGroup
}

type rayGroup struct {
	head    *rayHead      // the leader's running Ray head; nil: none
	changed chan struct{} // closed at the next change of the head or its nodes
}

// rayHead is one run of a leader's Ray head with the worker nodes that joined it.
type rayHead struct {
	pod, ip string
	gpus    int
	nodes   map[*rayNode]bool
}

// rayNode is one worker's Ray node.
type rayNode struct {
	pod, ip string
	gpus    int
}

// rayView is a group's state at one moment.
type rayView struct {
	head  *rayHead
	nodes []*rayNode
	gpus  int // the head's and its nodes' GPUs: what Ray's placement groups can take
}

func NewRayCluster() *RayCluster { return &RayCluster{groups: map[rayGroupKey]*rayGroup{}} }

func (rc *RayCluster) group(k rayGroupKey) *rayGroup {
	g := rc.groups[k]
	if g == nil {
		g = &rayGroup{changed: make(chan struct{})}
		rc.groups[k] = g
	}
	return g
}

// notify wakes every waiter on the group (mu held); a group without a head is forgotten, so a
// deleted LeaderWorkerSet leaves nothing behind once its waiters woke.
func (rc *RayCluster) notify(k rayGroupKey, g *rayGroup) {
	close(g.changed)
	g.changed = make(chan struct{})
	if g.head == nil {
		delete(rc.groups, k)
	}
}

// watch is the group's state and a channel closed at its next change.
func (rc *RayCluster) watch(k rayGroupKey) (rayView, <-chan struct{}) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	g := rc.group(k)
	v := rayView{head: g.head}
	if g.head != nil {
		v.gpus = g.head.gpus
		for n := range g.head.nodes {
			v.nodes = append(v.nodes, n)
			v.gpus += n.gpus
		}
	}
	return v, g.changed
}

// startHead makes h the group's head; a head still registered (a leader run that did not
// stop) is replaced, and its nodes go with it.
func (rc *RayCluster) startHead(k rayGroupKey, h *rayHead) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	g := rc.group(k)
	g.head = h
	rc.notify(k, g)
}

// stopHead removes h if it is still the group's head.
func (rc *RayCluster) stopHead(k rayGroupKey, h *rayHead) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if g := rc.groups[k]; g != nil && g.head == h {
		g.head = nil
		rc.notify(k, g)
	}
}

// join adds n to h; false: h is no longer the group's head.
func (rc *RayCluster) join(k rayGroupKey, h *rayHead, n *rayNode) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	g := rc.groups[k]
	if g == nil || g.head != h {
		return false
	}
	h.nodes[n] = true
	rc.notify(k, g)
	return true
}

// leave removes n from h.
func (rc *RayCluster) leave(k rayGroupKey, h *rayHead, n *rayNode) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if g := rc.groups[k]; g != nil && g.head == h && h.nodes[n] {
		delete(h.nodes, n)
		rc.notify(k, g)
	}
}

// clusterReady is the leader script's test: `[ $active_nodes -eq $ray_cluster_size ]`, the
// head counting as one node. A size that is not a number never matches (bash's -eq fails).
func clusterReady(active int, size string) bool {
	n, err := strconv.Atoi(strings.TrimSpace(size))
	return err == nil && n == active
}

// rayStamp is Ray's Python logger's time format.
func rayStamp() string { return time.Now().UTC().Format("2006-01-02 15:04:05,000") }

// rayRuntimeStarted is what `ray start` prints once its node runs.
func (s *Server) rayRuntimeStarted() {
	for _, l := range []string{"--------------------", "Ray runtime started.", "--------------------", ""} {
		s.log.Printf("%s", l)
	}
}

// startRay runs the script (and, for a leader, what follows it) in the process's goroutine.
func (s *Server) startRay(l *rayLaunch) {
	for _, e := range l.shellErrors {
		s.log.Printf("%s", e)
	}
	switch l.role {
	case "worker":
		go s.rayWorker(l)
	case "leader":
		go s.rayLeader(l)
	default:
		s.log.Printf("unknown subcommand: %s", l.role)
		s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
	}
}

// rayWorker is the script's worker part: `ray start --address=<leader>:<port> --block`,
// retried every 5 s while the leader's head is not up, until the init timeout. Once joined it
// blocks; a head that goes away ends that attempt as a raylet that lost its GCS does.
func (s *Server) rayWorker(l *rayLaunch) {
	if l.address == "" {
		s.log.Printf("Error: Missing argument --ray_address")
		s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
		return
	}
	addr := l.address + ":" + l.port
	rc := s.cfg.Ray
	// own is the worker's group by its labels: only to wake early when a head there changes.
	// The head it joins is the one at the address its --ray_address resolves to.
	own, labelled := groupKey(s.spec.Ray)
	left := l.budget()
	for {
		var view rayView
		var changed <-chan struct{}
		var key rayGroupKey
		if rc != nil && labelled {
			_, changed = rc.watch(own)
		}
		if rc != nil {
			if ip, err := s.resolve(l.address); err == nil {
				if k, ok := rc.headAt(ip); ok && s.rayReachable(ip, l.port) {
					key = k
					view, _ = rc.watch(k)
				}
			}
		}
		if view.head != nil {
			n := &rayNode{pod: s.spec.Ray.Pod, ip: s.spec.IP, gpus: s.spec.GPUs}
			if rc.join(key, view.head, n) {
				s.log.Printf("Local node IP: %s", s.spec.IP)
				s.log.Printf("")
				s.rayRuntimeStarted()
				s.log.Printf("To terminate the Ray runtime, run")
				s.log.Printf("  ray stop")
				s.log.Printf("")
				s.log.Printf("--block")
				s.log.Printf("  This command will now block forever until terminated by a signal.")
				s.log.Printf("  Running subprocesses are monitored and a message will be printed if any of them terminate unexpectedly. Subprocesses exit with SIGTERM will be treated as graceful, thus NOT reported.")
				if !s.rayBlock(key, view.head, n) {
					return
				}
				s.log.Printf("Some Ray subprocesses exited unexpectedly:")
				s.log.Printf("  raylet [exit code=1]")
				s.log.Printf("")
				s.log.Printf("Remaining processes will be killed.")
				left -= rayRetry
				s.log.Printf("Waiting until the ray worker is active...")
				if left <= 0 {
					break
				}
				continue
			}
			continue // the head changed meanwhile: look again
		}
		s.log.Printf("ConnectionError: Unable to connect to GCS at %s. Check that (1) Ray GCS with matching version started successfully at the specified address, and (2) there is no firewall setting preventing access.", addr)
		s.log.Printf("Waiting until the ray worker is active...")
		if left <= 0 {
			break
		}
		t0 := time.Now()
		timer := time.NewTimer(min(rayRetry, left))
		select {
		case <-changed: // nil without a group: never
		case <-timer.C:
		case <-s.life.Stopped():
			timer.Stop()
			return
		}
		timer.Stop()
		left -= time.Since(t0)
	}
	s.log.Printf("Ray worker starts timeout, head address: %s", addr)
	s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
}

// resolve is the process's getaddrinfo of a host, through the pod's resolv.conf.
func (s *Server) resolve(host string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-s.life.Stopped():
			cancel()
		case <-ctx.Done():
		}
	}()
	return lookup(ctx, s.spec, host)
}

// headAt is the group whose running head listens on ip; ok false: no head there.
func (rc *RayCluster) headAt(ip string) (rayGroupKey, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for k, g := range rc.groups {
		if g.head != nil && g.head.ip == ip {
			return k, true
		}
	}
	return rayGroupKey{}, false
}

// rayBlock is `ray start --block` on a joined node: true when the head went away, false when
// the process was stopped (it leaves the cluster).
func (s *Server) rayBlock(key rayGroupKey, h *rayHead, n *rayNode) bool {
	rc := s.cfg.Ray
	for {
		view, changed := rc.watch(key)
		if view.head != h {
			return true
		}
		select {
		case <-changed:
		case <-s.life.Stopped():
			rc.leave(key, h, n)
			return false
		}
	}
}

// rayLeader is the script's leader part, `ray start --head` and the wait for the cluster's
// size, then what follows it: `exec vllm serve ...` on the Ray cluster.
func (s *Server) rayLeader(l *rayLaunch) {
	if l.clusterSize == "" {
		s.log.Printf("Error: Missing argument --ray_cluster_size")
		s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
		return
	}
	rc := s.cfg.Ray
	key, grouped := groupKey(s.spec.Ray)
	if rc == nil || !grouped {
		// no group to find: a cluster of this pod alone
		rc, key = NewRayCluster(), rayGroupKey{name: s.spec.Ray.Pod}
	}
	head := &rayHead{pod: s.spec.Ray.Pod, ip: s.spec.IP, gpus: s.spec.GPUs, nodes: map[*rayNode]bool{}}
	if !s.life.OnEnd(func() { rc.startHead(key, head) }, func() { rc.stopHead(key, head) }) {
		return
	}

	s.log.Printf("Usage stats collection is enabled by default without user confirmation because this terminal is detected to be non-interactive. To disable this, add `--disable-usage-stats` to the command that starts the cluster, or run the following command: `ray disable-usage-stats` before starting the cluster. See https://docs.ray.io/en/master/cluster/usage-stats.html for more details.")
	s.log.Printf("")
	s.log.Printf("Local node IP: %s", s.spec.IP)
	s.log.Printf("")
	s.rayRuntimeStarted()
	s.log.Printf("Next steps")
	s.log.Printf("  To add another node to this Ray cluster, run")
	s.log.Printf("    ray start --address='%s:%s'", s.spec.IP, l.port)
	s.log.Printf("")
	s.log.Printf("  To connect to this Ray cluster:")
	s.log.Printf("    import ray")
	s.log.Printf("    ray.init()")
	s.log.Printf("")
	s.log.Printf("  To terminate the Ray runtime, run")
	s.log.Printf("    ray stop")
	s.log.Printf("")
	s.log.Printf("  To view the status of the cluster, use")
	s.log.Printf("    ray status")

	deadline := time.Now().Add(l.budget())
	var view rayView
	for last, tick := -1, false; ; {
		var changed <-chan struct{}
		view, changed = rc.watch(key)
		active := 1 + len(view.nodes)
		if clusterReady(active, l.clusterSize) {
			s.log.Printf("All ray workers are active and the ray cluster is initialized successfully.")
			break
		}
		if !time.Now().Before(deadline) {
			s.log.Printf("Waiting for all ray workers to be active timed out.")
			s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
			return
		}
		// the script's check every 5 s, and the fake's on each change of the cluster
		if tick || active != last {
			s.log.Printf("Wait for all ray workers to be active. %d/%s is active", active, l.clusterSize)
			last = active
		}
		timer := time.NewTimer(min(rayRetry, time.Until(deadline)))
		select {
		case <-changed:
			tick = false
		case <-timer.C:
			tick = true
		case <-s.life.Stopped():
			timer.Stop()
			return
		}
		timer.Stop()
	}
	s.serveOnRay(l, rc, key, view)
}

// serveOnRay is `exec vllm serve ...` after the script: the fake vLLM server with the Ray
// cluster's GPUs; a node of that cluster leaving kills its engine, as a Ray actor's death does.
func (s *Server) serveOnRay(l *rayLaunch, rc *RayCluster, key rayGroupKey, view rayView) {
	if l.then == nil {
		s.life.Exit(proc.Exit{Code: 0, Reason: "Completed"})
		return
	}
	prog, argv, ok := serveCommand(l.then, nil)
	if !ok {
		return // some other program: it runs, silent and without a port, until stopped
	}
	args, err := parseServeArgs(prog, argv)
	if err != nil {
		s.argFailure(err)
		return
	}
	if !args.maxNumSeqsSet && s.cfg.MaxNumSeqs > 0 {
		args.maxNumSeqs = s.cfg.MaxNumSeqs
	}
	s.life.Lock()
	s.args, s.port = args, args.port
	if args.backend == "ray" {
		s.rayAddress = view.head.ip + ":" + l.port
		s.rayGPUs = view.gpus
	}
	s.life.Unlock()
	go s.watchRayNodes(rc, key, view)
	s.run()
}

// watchRayNodes kills the engine when a node it was started with leaves the cluster: the
// RayWorkerWrapper actors on it die, and with them the engine's next step.
func (s *Server) watchRayNodes(rc *RayCluster, key rayGroupKey, started rayView) {
	for {
		view, changed := rc.watch(key)
		if view.head != started.head {
			return // the head itself stopped: the process is ending
		}
		now := map[*rayNode]bool{}
		for _, n := range view.nodes {
			now[n] = true
		}
		for _, n := range started.nodes {
			if !now[n] {
				s.actorDied(n)
				return
			}
		}
		select {
		case <-changed:
		case <-s.life.Stopped():
			return
		}
	}
}

// actorDied is the engine losing the Ray actor on node n: while loading, the engine fails to
// start; while serving, the engine core dies and the API server with it. Exit 1.
func (s *Server) actorDied(n *rayNode) {
	s.life.Lock()
	serving := s.life.Serving()
	done := s.life.Over()
	s.life.Unlock()
	if done {
		return
	}
	tb := []string{"Traceback (most recent call last):",
		`  File "` + pyLib + `/vllm/v1/engine/core.py", line 701, in run_engine_core`,
		"    engine_core.run_busy_loop()",
		`  File "` + pyLib + `/vllm/v1/executor/ray_distributed_executor.py", line 104, in execute_model`,
		"    return refs[0].get()",
		`  File "` + pyLib + `/ray/experimental/compiled_dag_ref.py", line 115, in get`,
		"    raise execution_error from None",
		"ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
		"\tclass_name: RayWorkerWrapper",
		"\tpid: 312",
		"\tip: " + n.ip,
		"The actor is dead because its node has died. Node IP: " + n.ip,
	}
	if !serving {
		s.core("ERROR", "core.py:708", "EngineCore failed to start.")
		s.raw(corePrefix(), tb...)
		s.failPython(engineInitFailed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return
	}
	s.core("ERROR", "core.py:710", "EngineCore encountered a fatal error.")
	s.raw(corePrefix(), tb...)
	s.engineDeadShutdown()
}

// rayReachable: the NetworkPolicies of the head's pod admit this pod on the GCS port (a refused
// join is Ray's connection error, retried as any).
func (s *Server) rayReachable(headIP, port string) bool {
	p, _ := strconv.Atoi(port)
	ok, why := s.cfg.admitsPeer(s.spec.Ray.Namespace+"/"+s.spec.Ray.Pod, s.spec.IP, headIP, int32(p))
	if !ok {
		klog.V(2).InfoS("network policy: refused a Ray join", "why", why)
	}
	return ok
}
