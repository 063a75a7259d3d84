// NetworkPolicy, ingress only, on the pod IP:port of the servers this process runs for pods
// (the fake vLLM server): a small model of k8s.io/api/networking/v1's semantics, so a policy
// a test or the operator creates is enforced as a network plugin would, and the connection's
// source pod found from its socket's owner. Scope (README, "NetworkPolicy"): ingress to
// in-process servers; exec images' own listeners and egress are not policed.

package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ingressAllowed is the NetworkPolicy API's ingress decision for a connection to dst's port
// from src (a pod; nil for a source that is no pod, which only an ipBlock or a rule without
// "from" admits) at srcIP. policies are every policy of dst's namespace; nsLabels reads a
// namespace's labels. No policy selecting dst for ingress: allowed; else allowed only if
// some rule of some such policy admits both the port and the source. The reason names the
// policies that refused.
func ingressAllowed(policies []*networkingv1.NetworkPolicy, dst *v1.Pod, port int32, src *v1.Pod, srcIP net.IP, nsLabels func(string) labels.Set) (bool, string) {
	var selecting []string
	for _, p := range policies {
		if p.Namespace != dst.Namespace || !appliesToIngress(p) || !selects(&p.Spec.PodSelector, dst.Labels) {
			continue
		}
		selecting = append(selecting, p.Name)
		for _, r := range p.Spec.Ingress {
			if portAdmitted(r.Ports, dst, port) && sourceAdmitted(r.From, p.Namespace, src, srcIP, nsLabels) {
				return true, "admitted by " + p.Namespace + "/" + p.Name
			}
		}
	}
	if len(selecting) == 0 {
		return true, "no policy selects the pod"
	}
	return false, "no rule of " + dst.Namespace + "/{" + strings.Join(selecting, ",") + "} admits it"
}

// appliesToIngress: policyTypes empty means Ingress (and Egress only with egress rules).
func appliesToIngress(p *networkingv1.NetworkPolicy) bool {
	return len(p.Spec.PolicyTypes) == 0 || slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

// selects: an empty selector selects everything; a malformed one nothing.
func selects(s *metav1.LabelSelector, l map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(l))
}

// portAdmitted: no ports means every port; a port is a number (with endPort a range) or a
// name of one of dst's container ports; protocol defaults to TCP, the only one served here.
func portAdmitted(ports []networkingv1.NetworkPolicyPort, dst *v1.Pod, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != v1.ProtocolTCP {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.StrVal != "":
			if n, ok := namedPort(dst, p.Port.StrVal); ok && n == port {
				return true
			}
		case p.EndPort != nil:
			if port >= p.Port.IntVal && port <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == port:
			return true
		}
	}
	return false
}

func namedPort(pod *v1.Pod, name string) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == name && (cp.Protocol == "" || cp.Protocol == v1.ProtocolTCP) {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

// sourceAdmitted: no peers means every source; a peer is an ipBlock (the source's address in
// its CIDR, outside its excepts), or pods: podSelector alone in the policy's namespace,
// namespaceSelector alone every pod of the namespaces it selects, both the pods of those.
func sourceAdmitted(from []networkingv1.NetworkPolicyPeer, policyNS string, src *v1.Pod, srcIP net.IP, nsLabels func(string) labels.Set) bool {
	if len(from) == 0 {
		return true
	}
	for _, peer := range from {
		if b := peer.IPBlock; b != nil {
			if inCIDR(b.CIDR, srcIP) && !slices.ContainsFunc(b.Except, func(c string) bool { return inCIDR(c, srcIP) }) {
				return true
			}
			continue
		}
		if src == nil {
			continue
		}
		if peer.NamespaceSelector == nil {
			if src.Namespace != policyNS {
				continue
			}
		} else if !selects(peer.NamespaceSelector, nsLabels(src.Namespace)) {
			continue
		}
		if peer.PodSelector == nil || selects(peer.PodSelector, src.Labels) {
			return true
		}
	}
	return false
}

func inCIDR(cidr string, ip net.IP) bool {
	_, n, err := net.ParseCIDR(cidr)
	return err == nil && ip != nil && n.Contains(ip)
}

// netPolicies enforces the cluster's policies on the listeners it guards.
type netPolicies struct {
	policies   networkinglisters.NetworkPolicyLister
	namespaces corelisters.NamespaceLister
	// pods is the kubelet's pod informer, indexed by IP and UID (usePods).
	pods cache.Indexer
	// procs are the exec images' processes: a socket one of them (or a child) holds is that
	// pod's, whatever address it bound.
	procs *execProcs
	// owner finds the pid holding the client end of a loopback connection (a test replaces it).
	owner func(client, server *net.TCPAddr, pids []int) (int, bool)
}

const (
	byPodIP  = "podIP"
	byPodUID = "podUID"
)

// startNetPolicies watches namespaces and NetworkPolicies until ctx ends.
func startNetPolicies(ctx context.Context, client kubernetes.Interface) *netPolicies {
	f := informers.NewSharedInformerFactory(client, 0)
	n := &netPolicies{policies: f.Networking().V1().NetworkPolicies().Lister(), namespaces: f.Core().V1().Namespaces().Lister(), owner: socketOwner}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); f.Shutdown() }()
	return n
}

// usePods indexes the kubelet's pod informer (before it starts) by IP and UID.
func (n *netPolicies) usePods(inf cache.SharedIndexInformer, procs *execProcs) error {
	n.procs = procs
	n.pods = inf.GetIndexer()
	return inf.AddIndexers(cache.Indexers{
		byPodIP: func(obj any) ([]string, error) {
			if p, ok := obj.(*v1.Pod); ok && p.Status.PodIP != "" {
				return []string{p.Status.PodIP}, nil
			}
			return nil, nil
		},
		byPodUID: func(obj any) ([]string, error) {
			if p, ok := obj.(*v1.Pod); ok {
				return []string{string(p.UID)}, nil
			}
			return nil, nil
		},
	})
}

func (n *netPolicies) podBy(index, key string) *v1.Pod {
	if n.pods == nil {
		return nil
	}
	objs, err := n.pods.ByIndex(index, key)
	if err != nil {
		return nil
	}
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.DeletionTimestamp == nil {
			return p
		}
	}
	if len(objs) > 0 {
		p, _ := objs[0].(*v1.Pod)
		return p
	}
	return nil
}

// admit decides one accepted connection; the reason is for the log.
func (n *netPolicies) admit(c net.Conn) (bool, string) {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return true, "not TCP"
	}
	dst := n.podBy(byPodIP, local.IP.String())
	if dst == nil {
		return true, "no pod at " + local.IP.String()
	}
	if !n.isolated(dst) {
		return true, "no policy selects " + dst.Namespace + "/" + dst.Name
	}
	src, why := n.source(local, remote)
	if src == nil && why != "" {
		return false, why
	}
	if src == nil {
		// A pod cannot refuse its node: kubelet probes, host processes (the operator and the
		// test harness run as host processes here).
		return true, "from the node " + remote.IP.String()
	}
	return n.decide(dst, int32(local.Port), src, remote.IP)
}

// isolated: some policy selects dst for ingress, so its source must be found (a read of /proc);
// else every connection is admitted, as ingressAllowed would say.
func (n *netPolicies) isolated(dst *v1.Pod) bool {
	policies, err := n.policies.NetworkPolicies(dst.Namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	return slices.ContainsFunc(policies, func(p *networkingv1.NetworkPolicy) bool {
		return appliesToIngress(p) && selects(&p.Spec.PodSelector, dst.Labels)
	})
}

// admitsPeer decides an in-process connection from the pod src (namespace/name: its IP may
// not be in the cache yet when its process starts) at srcIP to dstIP:port: a fake Ray worker
// joining a head. Nil, or no pod at dstIP: admitted.
func (n *netPolicies) admitsPeer(src, srcIP, dstIP string, port int32) (bool, string) {
	if n == nil || n.pods == nil {
		return true, "no enforcement"
	}
	dst := n.podBy(byPodIP, dstIP)
	if dst == nil {
		return true, "no pod at " + dstIP
	}
	o, ok, err := n.pods.GetByKey(src)
	p, isPod := o.(*v1.Pod)
	if err != nil || !ok || !isPod {
		return false, "unknown source pod " + src
	}
	return n.decide(dst, port, p, net.ParseIP(srcIP))
}

// decide is ingressAllowed over the caches.
func (n *netPolicies) decide(dst *v1.Pod, port int32, src *v1.Pod, srcIP net.IP) (bool, string) {
	policies, err := n.policies.NetworkPolicies(dst.Namespace).List(labels.Everything())
	if err != nil || len(policies) == 0 {
		return true, "no policy in " + dst.Namespace
	}
	nsLabels := func(ns string) labels.Set {
		o, err := n.namespaces.Get(ns)
		if err != nil {
			return nil
		}
		return o.Labels
	}
	ok, reason := ingressAllowed(policies, dst, port, src, srcIP, nsLabels)
	return ok, fmt.Sprintf("%s/%s -> %s/%s:%d: %s", src.Namespace, src.Name, dst.Namespace, dst.Name, port, reason)
}

// source is the pod a connection comes from: the pod of the exec process holding its client
// end, else the pod whose IP it comes from (in-process clients bind their pod's IP), else
// none (the node). A pod's process bound to another pod's IP is spoofing, which a network
// plugin drops: refused with a reason.
func (n *netPolicies) source(local, remote *net.TCPAddr) (*v1.Pod, string) {
	byIP := n.podBy(byPodIP, remote.IP.String())
	if n.procs != nil {
		pids, uids := n.procs.pids()
		if len(pids) > 0 {
			if pid, ok := n.owner(remote, local, pids); ok {
				if p := n.podBy(byPodUID, string(uids[pid])); p != nil {
					if byIP != nil && byIP.UID != p.UID {
						return nil, fmt.Sprintf("%s/%s sent from %s, pod %s/%s's address", p.Namespace, p.Name, remote.IP, byIP.Namespace, byIP.Name)
					}
					return p, ""
				}
			}
		}
	}
	return byIP, ""
}

// clientIP is the address a forwarder (the Service proxy) dials from for c's client, so the
// policy at the pod sees the client pod, as kube-proxy keeps a ClusterIP connection's source
// address; nil: the client is no pod (or a spoofing one), the forwarder dials as the node.
func (n *netPolicies) clientIP(c net.Conn) net.IP {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if n == nil || !ok1 || !ok2 {
		return nil
	}
	if p, _ := n.source(local, remote); p != nil {
		return net.ParseIP(p.Status.PodIP)
	}
	return nil
}

// pids are the live exec processes' leaders and the pod each runs for.
func (e *execProcs) pids() ([]int, map[int]types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var pids []int
	uids := map[int]types.UID{}
	for p := range e.live {
		pids = append(pids, p.pid)
		uids[p.pid] = p.pod
	}
	return pids, uids
}

// guard wraps a pod's listener: a connection no policy admits is reset at once. Loopback's
// handshake is done by the kernel before Accept, so the listener cannot drop the SYN as a
// dropping plugin would (the client would wait out its timeout); a reset keeps a refused
// attempt as bounded as a refused port while failing every request on it. Each connection is
// decided on its own goroutine: finding a source's process reads /proc, and a kubelet probe
// must not queue behind it (a CNI decides packets in parallel too).
func (n *netPolicies) guard(l net.Listener) net.Listener {
	if n == nil {
		return l
	}
	g := &guardedListener{Listener: l, n: n, conns: make(chan net.Conn), errs: make(chan error), closed: make(chan struct{})}
	go g.loop()
	return g
}

type guardedListener struct {
	net.Listener
	n      *netPolicies
	conns  chan net.Conn // admitted connections, for Accept
	errs   chan error    // the listener's Accept errors, for Accept
	closed chan struct{} // closed by Close: nothing waits on Accept any more
	once   sync.Once
}

func (g *guardedListener) Accept() (net.Conn, error) {
	select {
	case c := <-g.conns:
		return c, nil
	case err := <-g.errs:
		return nil, err
	case <-g.closed:
		return nil, net.ErrClosed
	}
}

func (g *guardedListener) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Listener.Close()
}

// loop accepts until the listener is closed, deciding each connection on its own goroutine.
func (g *guardedListener) loop() {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			select {
			case g.errs <- err:
			case <-g.closed:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go g.decide(c)
	}
}

func (g *guardedListener) decide(c net.Conn) {
	ok, why := g.n.admit(c)
	if !ok {
		klog.V(2).InfoS("network policy: refused", "from", c.RemoteAddr(), "to", c.LocalAddr(), "why", why)
		if tc, isTCP := c.(*net.TCPConn); isTCP {
			_ = tc.SetLinger(0) // RST, not FIN: the client fails at once
		}
		c.Close()
		return
	}
	klog.V(4).InfoS("network policy: admitted", "from", c.RemoteAddr(), "to", c.LocalAddr(), "why", why)
	select {
	case g.conns <- c:
	case <-g.closed:
		c.Close()
	}
}

// socketOwner finds which of pids (or their descendants) holds the TCP socket whose local
// end is client and remote end server: its inode from /proc/net/tcp, then the processes'
// descriptors.
func socketOwner(client, server *net.TCPAddr, pids []int) (int, bool) {
	inode, ok := tcpInode(client, server)
	if !ok {
		return 0, false
	}
	link := "socket:[" + inode + "]"
	for _, leader := range pids {
		seen := map[int]bool{}
		queue := []int{leader}
		for len(queue) > 0 && len(seen) < 256 {
			pid := queue[0]
			queue = queue[1:]
			if seen[pid] {
				continue
			}
			seen[pid] = true
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
			for _, fd := range fds {
				if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == link {
					return leader, true
				}
			}
			queue = append(queue, childPids(pid)...)
		}
	}
	return 0, false
}

func childPids(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// tcpInode reads /proc/net/tcp for the socket local -> remote (IPv4, as every address here).
func tcpInode(local, remote *net.TCPAddr) (string, bool) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", false
	}
	defer f.Close()
	want := procAddr(local) + " " + procAddr(remote)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[1]+" "+fields[2] == want {
			return fields[9], true
		}
	}
	return "", false
}

// procAddr is an address as /proc/net/tcp prints it: the IPv4 address's four bytes read as
// one native-order 32-bit number, in hex, then the port.
func procAddr(a *net.TCPAddr) string {
	ip4 := a.IP.To4()
	if ip4 == nil {
		return ""
	}
	return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(ip4), a.Port)
}

// Guard and AdmitsPeer are guard and admitsPeer for the model servers (proc.Ingress).
func (n *netPolicies) Guard(l net.Listener) net.Listener { return n.guard(l) }

// AdmitsPeer is admitsPeer.
func (n *netPolicies) AdmitsPeer(src, srcIP, dstIP string, port int32) (bool, string) {
	return n.admitsPeer(src, srcIP, dstIP, port)
}
