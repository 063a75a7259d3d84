package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func npPod(ns, name, ip string, l map[string]string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Labels: l}}
	p.Status.PodIP = ip
	p.Spec.Containers = []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8000}}}}
	return p
}

func np(ns, name string, sel map[string]string, types []networkingv1.PolicyType, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}, PolicyTypes: types, Ingress: rules}}
}

func tcp(p intstr.IntOrString) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Port: &p}
}

// TestIngressAllowed: the NetworkPolicy API's ingress semantics, case by case.
func TestIngressAllowed(t *testing.T) {
	model := npPod("a", "model", "127.9.0.1", map[string]string{"app": "model"})
	sameNS := npPod("a", "client", "127.9.0.2", map[string]string{"app": "client"})
	tenant := npPod("b", "tenant", "127.9.0.3", map[string]string{"app": "client"})
	activator := npPod("system", "activator", "127.9.0.4", map[string]string{"app.kubernetes.io/name": "inferenceservice-activator"})
	ns := map[string]labels.Set{"a": {"kubernetes.io/metadata.name": "a"}, "b": {"kubernetes.io/metadata.name": "b", "team": "b"},
		"system": {"kubernetes.io/metadata.name": "system"}}
	nsLabels := func(n string) labels.Set { return ns[n] }
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	own := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}
	system := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "system"}},
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "inferenceservice-activator"}}}
	fence := np("a", "fence", map[string]string{"app": "model"}, ingress,
		networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{own, system}, Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(8000))}})
	for _, tc := range []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		dst      *v1.Pod
		port     int32
		src      *v1.Pod
		want     bool
	}{
		{"no policy: all allowed", nil, model, 8000, tenant, true},
		{"a policy of another namespace does not apply", []*networkingv1.NetworkPolicy{np("b", "x", nil, ingress)}, model, 8000, tenant, true},
		{"a policy selecting other pods does not apply", []*networkingv1.NetworkPolicy{np("a", "x", map[string]string{"app": "other"}, ingress)}, model, 8000, tenant, true},
		{"an Egress-only policy does not isolate ingress", []*networkingv1.NetworkPolicy{np("a", "x", nil, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress})}, model, 8000, tenant, true},
		{"no policyTypes means Ingress: deny all", []*networkingv1.NetworkPolicy{np("a", "x", nil, nil)}, model, 8000, sameNS, false},
		{"a rule without from or ports admits all", []*networkingv1.NetworkPolicy{np("a", "x", nil, ingress, networkingv1.NetworkPolicyIngressRule{})}, model, 8000, tenant, true},
		{"own namespace by podSelector alone", []*networkingv1.NetworkPolicy{fence}, model, 8000, sameNS, true},
		{"another tenant refused", []*networkingv1.NetworkPolicy{fence}, model, 8000, tenant, false},
		{"namespace and pod selector together", []*networkingv1.NetworkPolicy{fence}, model, 8000, activator, true},
		{"the right namespace, the wrong pod", []*networkingv1.NetworkPolicy{fence}, model, 8000,
			npPod("system", "other", "127.9.0.5", map[string]string{"app.kubernetes.io/name": "other"}), false},
		{"an admitted peer on another port", []*networkingv1.NetworkPolicy{fence}, model, 9000, sameNS, false},
		{"policies add up: a second one admits the tenant", []*networkingv1.NetworkPolicy{fence, np("a", "team-b", nil, ingress,
			networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}}}})},
			model, 8000, tenant, true},
		{"a named port", []*networkingv1.NetworkPolicy{np("a", "x", nil, ingress, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("http"))}})}, model, 8000, tenant, true},
		{"a named port the pod lacks", []*networkingv1.NetworkPolicy{np("a", "x", nil, ingress, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("grpc"))}})}, model, 8000, tenant, false},
		{"a port range", []*networkingv1.NetworkPolicy{np("a", "x", nil, ingress, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(7000)), EndPort: ptr.To[int32](8000)}}})}, model, 8000, tenant, true},
		{"UDP admits no TCP", []*networkingv1.NetworkPolicy{np("a", "x", nil, ingress, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(8000))}}})}, model, 8000, tenant, false},
		{"an ipBlock with an except", []*networkingv1.NetworkPolicy{np("a", "x", nil, ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "127.9.0.0/16", Except: []string{"127.9.0.3/32"}}}}})}, model, 8000, sameNS, true},
		{"the except itself", []*networkingv1.NetworkPolicy{np("a", "x", nil, ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "127.9.0.0/16", Except: []string{"127.9.0.3/32"}}}}})}, model, 8000, tenant, false},
	} {
		got, why := ingressAllowed(tc.policies, tc.dst, tc.port, tc.src, net.ParseIP(tc.src.Status.PodIP), nsLabels)
		if got != tc.want {
			t.Errorf("%s: got %v (%s)", tc.name, got, why)
		}
	}
}

// TestNetPolDialHelper is the child process of TestSocketOwner: it dials NETPOL_DIAL and
// holds the connection until its stdin closes.
func TestNetPolDialHelper(t *testing.T) {
	addr := os.Getenv("NETPOL_DIAL")
	if addr == "" {
		t.Skip("a helper process")
	}
	d := net.Dialer{}
	if src := os.Getenv("NETPOL_BIND"); src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(2)
	}
	fmt.Println("connected", c.LocalAddr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// TestSocketOwner: the process holding a connection's client end is found, whatever address
// it dialled from; one that is not among the pids is not.
func TestSocketOwner(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNetPolDialHelper$")
	cmd.Env = append(os.Environ(), "NETPOL_DIAL="+l.Addr().String(), "EXEC_TEST_CHILD=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client, server := c.RemoteAddr().(*net.TCPAddr), c.LocalAddr().(*net.TCPAddr)
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if pid, ok := socketOwner(client, server, []int{other.Process.Pid, cmd.Process.Pid}); !ok || pid != cmd.Process.Pid {
		t.Fatalf("owner of %s -> %s: %d %v, want %d", client, server, pid, ok, cmd.Process.Pid)
	}
	// This process holds only the server end, and an unrelated process nothing.
	if pid, ok := socketOwner(client, server, []int{other.Process.Pid}); ok {
		t.Fatalf("found in %d", pid)
	}
	if _, ok := socketOwner(server, client, []int{cmd.Process.Pid}); ok {
		t.Fatal("the server end found in the dialler")
	}
}

// TestGuardResets: through a guarded pod listener, a tenant's connection is reset before any
// byte, the namespace's own passes, and a connection from the node passes.
func TestGuardResets(t *testing.T) {
	model := npPod("a", "model", "127.9.0.1", map[string]string{"app": "model"})
	own := npPod("a", "client", "127.9.0.2", nil)
	tenant := npPod("b", "tenant", "127.9.0.3", nil)
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	n := &netPolicies{owner: func(*net.TCPAddr, *net.TCPAddr, []int) (int, bool) { return 0, false }}
	if err := n.usePods(inf, newExecProcs()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{model, own, tenant} {
		if err := inf.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	policies := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = policies.Add(np("a", "fence", nil, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}))
	n.policies = networkinglisters.NewNetworkPolicyLister(policies)
	n.namespaces = corelisters.NewNamespaceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))

	l, err := net.Listen("tcp", "127.9.0.1:0")
	if err != nil {
		t.Skipf("no 127.9.0.1 on this host: %v", err)
	}
	g := n.guard(l)
	defer g.Close()
	go func() {
		for {
			c, err := g.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	dial := func(from string) (string, error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		if from != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
		}
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if got, err := dial(tenant.Status.PodIP); err == nil || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the tenant: %q, %v; want a reset", got, err)
	}
	for _, from := range []string{own.Status.PodIP, ""} {
		if got, err := dial(from); err != nil || !strings.HasPrefix(got, "hello") {
			t.Fatalf("from %q: %q, %v", from, got, err)
		}
	}
}

// TestSourceByOwner: a connection held by a pod's process is that pod's whatever address it
// dialled from (the node's included); one bound to another pod's address is spoofing, refused
// with a reason; one no pod process holds is the pod of its address, else the node's.
func TestSourceByOwner(t *testing.T) {
	tenant := npPod("b", "tenant", "127.9.0.3", nil)
	victim := npPod("a", "activator", "127.9.0.4", nil)
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	procs := newExecProcs()
	procs.live[&execProcess{pid: 4242, pod: tenant.UID}] = struct{}{}
	n := &netPolicies{}
	if err := n.usePods(inf, procs); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{tenant, victim} {
		_ = inf.GetIndexer().Add(p)
	}
	server := &net.TCPAddr{IP: net.ParseIP("127.9.0.1"), Port: 8000}
	for _, tc := range []struct {
		from      string
		owned     bool
		want, why string
	}{
		{"127.0.0.1", true, "b/tenant", ""},
		{"127.9.0.3", true, "b/tenant", ""},
		{"127.9.0.4", true, "", "b/tenant sent from 127.9.0.4, pod a/activator's address"},
		{"127.9.0.4", false, "a/activator", ""},
		{"127.0.0.1", false, "", ""},
	} {
		n.owner = func(*net.TCPAddr, *net.TCPAddr, []int) (int, bool) { return 4242, tc.owned }
		p, why := n.source(server, &net.TCPAddr{IP: net.ParseIP(tc.from), Port: 40000})
		got := ""
		if p != nil {
			got = p.Namespace + "/" + p.Name
		}
		if got != tc.want || why != tc.why {
			t.Errorf("from %s (owned %v): %q %q, want %q %q", tc.from, tc.owned, got, why, tc.want, tc.why)
		}
	}
}

// TestAdmitsPeer: a fake Ray worker's join is decided by the head pod's policies, the worker
// found by its name (its IP may not be cached yet): its own group's worker joins, a stranger's
// and an unknown pod's do not.
func TestAdmitsPeer(t *testing.T) {
	group := map[string]string{"leaderworkerset.sigs.k8s.io/name": "big"}
	leader := npPod("a", "big-0", "127.9.0.1", group)
	worker := npPod("a", "big-0-1", "", group)
	stranger := npPod("b", "stranger", "", nil)
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	n := &netPolicies{}
	if err := n.usePods(inf, newExecProcs()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{leader, worker, stranger} {
		_ = inf.GetIndexer().Add(p)
	}
	policies := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = policies.Add(np("a", "big", group, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: group}}}}))
	n.policies = networkinglisters.NewNetworkPolicyLister(policies)
	n.namespaces = corelisters.NewNamespaceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	for src, want := range map[string]bool{"a/big-0-1": true, "b/stranger": false, "b/gone": false} {
		if got, why := n.admitsPeer(src, "127.9.0.7", "127.9.0.1", 6379); got != want {
			t.Errorf("%s: %v (%s)", src, got, why)
		}
	}
	if got, _ := (*netPolicies)(nil).admitsPeer("b/stranger", "", "127.9.0.1", 6379); !got {
		t.Error("without enforcement a join is refused")
	}
}
