// A multi-node SGLang group (a LeaderWorkerSet's pods, the operator's MultiNode scripts): every
// pod runs launch_server with --nnodes, its --node-rank and the leader's --dist-init-addr, and
// the schedulers of all nodes form one torch.distributed group through the leader's TCPStore.
// Here that is real TCP on the pods' loopback IPs: the leader (node rank 0) listens on
// --dist-init-addr's port of its own IP (behind the pod's NetworkPolicy, as any listener of
// the pod), a worker resolves the address's host through the pod's resolv.conf (the cluster
// DNS) and dials it, retrying as torch's TCPStore client does, and the group goes on only when
// all --nnodes joined; until --dist-timeout (torch's 30 minutes without one) runs out, when
// each side fails in torch.distributed's words. Once formed, the group lives as long as every
// member: a node lost makes the others' next collective fail (NCCL's remote error) and their
// schedulers die. Only rank 0 serves HTTP; a worker answers /health on its port once its
// schedulers are up (launch_dummy_health_check_server).
//
// The wire protocol between the fakes: a worker sends "join <rank>\n", the leader answers
// "go\n" once all joined; each worker sends "loaded\n" when its ranks hold their weights and KV
// cache (SGLang's ranks agree on max_total_num_tokens before the leader serves). A closed
// connection is the peer's death.

package sglang

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// defaultDistTimeout is torch.distributed's default_pg_timeout, SGLang passing no
	// --dist-timeout.
	defaultDistTimeout = 30 * time.Minute
	// connectRetry is the TCPStore client's pause between attempts.
	connectRetry = time.Second
)

// member is one connection of the group: a worker seen by the leader, or the leader seen by
// a worker.
type member struct {
	rank   int
	conn   net.Conn
	loaded chan struct{} // closed when the worker said "loaded"
	gone   chan struct{} // closed when its connection closed
}

// group is this process's place in its torch.distributed group.
type group struct {
	leader  bool
	mu      sync.Mutex
	members map[int]*member // the leader's workers by rank; a worker's leader at 0
	formed  bool
	changed chan struct{} // closed and replaced on every join or loss before forming
}

// distAddr is --dist-init-addr as host and port; torch's default of the launcher (no address)
// is the node's own loopback.
func (s *Server) distAddr() (string, int) {
	host, p, ok := strings.Cut(s.args.distInitAddr, ":")
	port, _ := strconv.Atoi(p)
	if !ok || s.args.distInitAddr == "" {
		return "127.0.0.1", port
	}
	return host, port
}

func (s *Server) distTimeout() time.Duration {
	if s.args.distTimeout > 0 {
		return time.Duration(s.args.distTimeout) * time.Second
	}
	return defaultDistTimeout
}

// initFrames lead into torch.distributed's init from a scheduler.
var initFrames = append(append([]string(nil), schedulerFrames...),
	`  File "`+srcDir+`/model_executor/model_runner.py", line 617, in init_torch_distributed`,
	"    init_distributed_environment(",
	`  File "`+srcDir+`/distributed/parallel_state.py", line 1350, in init_distributed_environment`,
	"    torch.distributed.init_process_group(",
	`  File "`+pyLib+`/torch/distributed/c10d_logger.py", line 81, in wrapper`,
	"    return func(*args, **kwargs)",
	`  File "`+pyLib+`/torch/distributed/distributed_c10d.py", line 1710, in init_process_group`,
	"    store, rank, world_size = next(rendezvous_iterator)",
	`  File "`+pyLib+`/torch/distributed/rendezvous.py", line 230, in _tcp_rendezvous_handler`,
	"    store = _create_c10d_store(",
	`  File "`+pyLib+`/torch/distributed/rendezvous.py", line 198, in _create_c10d_store`,
	"    return TCPStore(")

// ncclLost is what a rank's next collective raises when a peer node is gone.
func (s *Server) ncclLost(peerIP string) {
	s.schedulerDied([]string{
		`  File "` + srcDir + `/managers/scheduler.py", line 2917, in run_scheduler_process`,
		"    scheduler.event_loop_overlap()",
		`  File "` + srcDir + `/managers/scheduler.py", line 985, in event_loop_overlap`,
		"    batch = self.get_next_batch_to_run()",
		`  File "` + srcDir + `/managers/scheduler.py", line 1768, in get_next_batch_to_run`,
		"    self.tp_cpu_group.barrier()" + "",
	}, "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, remote process exited or there was a network error, NCCL version 2.27.3",
		"ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
		"Last error:",
		fmt.Sprintf("socketProgress: Connection closed by remote peer %s<%d>", peerIP, 40000+s.args.nodeRank))
}

// rendezvous forms the group; false: the process ended (its failure already logged).
func (s *Server) rendezvous() (*group, bool) {
	if s.args.nodeRank == 0 {
		return s.lead()
	}
	return s.join()
}

// lead is the TCPStore server of rank 0: it waits for every other node.
func (s *Server) lead() (*group, bool) {
	_, port := s.distAddr()
	g := &group{leader: true, members: map[int]*member{}, changed: make(chan struct{})}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.spec.IP, strconv.Itoa(port)))
	if err != nil {
		s.schedulerDied(initFrames, fmt.Sprintf("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: %d, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", port))
		return nil, false
	}
	ln = s.guard(ln)
	if !s.life.OnEnd(nil, func() { _ = ln.Close(); g.closeAll() }) {
		_ = ln.Close()
		return nil, false
	}
	go g.accept(s, ln)
	deadline := time.Now().Add(s.distTimeout())
	for {
		g.mu.Lock()
		joined, changed := len(g.members), g.changed
		if joined >= s.args.nnodes-1 {
			g.formed = true
			for _, m := range g.members {
				_, _ = m.conn.Write([]byte("go\n"))
			}
			g.mu.Unlock()
			break
		}
		g.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-changed:
			t.Stop()
			continue
		case <-s.life.Stopped():
			t.Stop()
			return nil, false
		case <-t.C:
		}
		s.schedulerDied(initFrames, fmt.Sprintf("torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients joined.",
			int(s.distTimeout().Seconds())+1, joined+1, s.args.nnodes))
		return nil, false
	}
	g.mu.Lock()
	for _, m := range g.members {
		go s.watch(m)
	}
	g.mu.Unlock()
	return g, true
}

// accept takes the workers' connections until the listener closes.
func (g *group) accept(s *Server, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go g.admit(s, c)
	}
}

// admit reads a worker's join; before the group formed it takes the rank's place (a restarted
// worker replaces its predecessor), after it the connection is refused.
func (g *group) admit(s *Server, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	_ = c.SetReadDeadline(time.Time{})
	var rank int
	if err != nil || !strings.HasPrefix(line, "join ") {
		_ = c.Close()
		return
	}
	rank, err = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "join ")))
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil || rank < 1 || rank >= s.args.nnodes || g.formed {
		_ = c.Close()
		return
	}
	if old := g.members[rank]; old != nil {
		_ = old.conn.Close()
	}
	m := &member{rank: rank, conn: c, loaded: make(chan struct{}), gone: make(chan struct{})}
	g.members[rank] = m
	close(g.changed)
	g.changed = make(chan struct{})
	go func() { // before forming: a worker that leaves gives its place back
		<-m.gone
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.formed && g.members[rank] == m {
			delete(g.members, rank)
			close(g.changed)
			g.changed = make(chan struct{})
		}
	}()
	go m.read()
}

// read follows a member's connection: "loaded", then its close.
func (m *member) read() {
	r := bufio.NewReader(m.conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			close(m.gone)
			return
		}
		if strings.TrimSpace(line) == "loaded" {
			select {
			case <-m.loaded:
			default:
				close(m.loaded)
			}
		}
	}
}

// watch kills this rank when a member of the formed group goes away.
func (s *Server) watch(m *member) {
	select {
	case <-m.gone:
		if !s.life.Ended() {
			host, _, _ := net.SplitHostPort(m.conn.RemoteAddr().String())
			s.ncclLost(host)
		}
	case <-s.life.Stopped():
	}
}

func (g *group) closeAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.members {
		_ = m.conn.Close()
	}
}

// loaded is the leader waiting for every worker's ranks to be loaded, and a worker telling its
// leader; false: the process ended.
func (g *group) loaded(s *Server) bool {
	g.mu.Lock()
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	g.mu.Unlock()
	if !g.leader {
		for _, m := range ms {
			_, _ = m.conn.Write([]byte("loaded\n"))
		}
		return !s.life.Ended()
	}
	for _, m := range ms {
		select {
		case <-m.loaded:
		case <-m.gone:
			return false // watch reports the loss
		case <-s.life.Stopped():
			return false
		}
	}
	return true
}

// c10dWarning is torch's c10d warning line, "[W<mmdd> <time> <pid> <file>:<line>] [c10d] ...".
func c10dWarning(format string, args ...any) string {
	now := time.Now().UTC()
	return fmt.Sprintf("[W%s %s 1 torch/csrc/distributed/c10d/socket.cpp:767] [c10d] %s", now.Format("0102"), now.Format("15:04:05.000000"),
		fmt.Sprintf(format, args...))
}

// join is a worker's TCPStore client: resolve the leader's address through the pod's DNS, dial,
// announce its rank and wait for the group, retrying every second until the timeout.
func (s *Server) join() (*group, bool) {
	host, port := s.distAddr()
	deadline := time.Now().Add(s.distTimeout())
	warned := ""
	warn := func(msg string) {
		if msg != warned {
			warned = msg
			s.log.Printf("%s", c10dWarning("%s", msg))
		}
	}
	for {
		if m, ok := s.dial(host, port, warn); ok {
			g := &group{members: map[int]*member{0: m}}
			if !s.life.OnEnd(nil, g.closeAll) {
				_ = m.conn.Close()
				return nil, false
			}
			go s.watch(m)
			return g, true
		}
		if !time.Now().Before(deadline) {
			break
		}
		if !s.life.Wait(min(connectRetry, time.Until(deadline))) {
			return nil, false
		}
	}
	s.schedulerDied(initFrames, fmt.Sprintf("torch.distributed.DistNetworkError: The client socket has timed out after %dms while trying to connect to (%s, %d).",
		s.distTimeout().Milliseconds(), host, port))
	return nil, false
}

// dial is one attempt: the address resolved, a connection, the rank sent and the leader's
// "go" read before the timeout; ok false: try again.
func (s *Server) dial(host string, port int, warn func(string)) (*member, bool) {
	ip := host
	if host == "127.0.0.1" || host == "localhost" {
		ip = s.spec.IP // the pod's own loopback
	} else if net.ParseIP(host) == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		go func() {
			select {
			case <-s.life.Stopped():
				cancel()
			case <-ctx.Done():
			}
		}()
		var err error
		if s.spec.DNS == nil {
			warn(fmt.Sprintf("The IPv4 network addresses of (%s, %d) cannot be retrieved (gai error: -2 - Name or service not known).", host, port))
			return nil, false
		}
		if ip, err = s.spec.DNS.Lookup(ctx, host); err != nil {
			warn(fmt.Sprintf("The IPv4 network addresses of (%s, %d) cannot be retrieved (gai error: -2 - Name or service not known).", host, port))
			return nil, false
		}
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		warn(fmt.Sprintf("The client socket has failed to connect to [%s]:%d (errno: 111 - Connection refused).", host, port))
		return nil, false
	}
	if _, err := c.Write([]byte("join " + strconv.Itoa(s.args.nodeRank) + "\n")); err != nil {
		_ = c.Close()
		warn(fmt.Sprintf("The client socket has failed to connect to [%s]:%d (errno: 104 - Connection reset by peer).", host, port))
		return nil, false
	}
	// wait for "go": the leader holds every rank in init_process_group until the last joins
	r := bufio.NewReader(c)
	got := make(chan error, 1)
	go func() {
		line, err := r.ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "go" {
			err = fmt.Errorf("unexpected %q", line)
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			_ = c.Close()
			warn(fmt.Sprintf("The client socket has failed to connect to [%s]:%d (errno: 104 - Connection reset by peer).", host, port))
			return nil, false
		}
	case <-s.life.Stopped():
		_ = c.Close()
		return nil, false
	}
	m := &member{rank: 0, conn: c, loaded: make(chan struct{}), gone: make(chan struct{})}
	go func() { // the leader's side of the connection only ever closes now
		_, _ = r.ReadString('\n')
		close(m.gone)
	}()
	return m, true
}

// serveWorker is a node of rank 1 or more once its schedulers are ready: no tokenizer, no HTTP
// API; launch_dummy_health_check_server answers /health and /health_generate on its port
// (uvicorn at log level warning: no lines), and the process lives as long as its schedulers.
func (s *Server) serveWorker() {
	s.listen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health", "/health_generate", "/ping":
			w.WriteHeader(http.StatusOK)
		default:
			writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		}
	}))
}
