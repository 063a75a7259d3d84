package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// testDNS is a cluster DNS server on loopback over a fake clientset's objects.
type testDNS struct {
	client kubernetes.Interface
	d      *clusterDNS
}

func startTestDNS(t *testing.T, objs ...*v1.Service) *testDNS {
	t.Helper()
	c := fake.NewClientset()
	for _, s := range objs {
		if _, err := c.CoreV1().Services(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d, err := startClusterDNS(ctx, c, "127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	return &testDNS{client: c, d: d}
}

func (td *testDNS) resolver(ns string) podResolver {
	return podResolver{server: td.d.addr, namespace: ns}
}

// addPod creates the pod and waits until the server's cache holds it.
func (td *testDNS) addPod(t *testing.T, p *v1.Pod) {
	t.Helper()
	if _, err := td.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok, _ := td.d.pods.GetByKey(p.Namespace + "/" + p.Name); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s never reached the DNS cache", p.Name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func headless(ns, name string, sel map[string]string, notReady bool) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Selector: sel, PublishNotReadyAddresses: notReady}}
}

func clusterIPService(ns, name, ip string, sel map[string]string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{ClusterIP: ip, Selector: sel, Ports: []v1.ServicePort{{Port: 8000}}}}
}

func dnsPod(ns, name, host, sub, ip string, ready bool, lbls map[string]string) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:   v1.PodSpec{Hostname: host, Subdomain: sub},
		Status: v1.PodStatus{PodIP: ip, Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}}}}
}

func query(t *testing.T, addr, name string) (int, []string) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	in, err := dns.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, rr := range in.Answer {
		ips = append(ips, rr.(*dns.A).A.String())
	}
	return in.Rcode, ips
}

// The records of the Kubernetes DNS specification: a ClusterIP Service's address, a headless
// Service's pods, a pod's hostname.subdomain only under a headless Service of that name that
// selects it, NXDOMAIN otherwise, and nothing answered outside the zone.
func TestClusterDNSRecords(t *testing.T) {
	sel := map[string]string{"app": "m"}
	td := startTestDNS(t,
		clusterIPService("ns", "web", "10.0.0.7", sel),
		headless("ns", "hl", sel, false),
		headless("ns", "all", sel, true),
		headless("ns", "other", map[string]string{"app": "x"}, true),
	)
	td.addPod(t, dnsPod("ns", "p0", "p0", "hl", "127.9.0.1", true, sel))
	td.addPod(t, dnsPod("ns", "p1", "p1", "web", "127.9.0.2", false, sel))
	td.addPod(t, dnsPod("ns", "p2", "p2", "all", "127.9.0.3", false, sel))
	for _, tc := range []struct {
		name  string
		rcode int
		ips   []string
	}{
		{"web.ns.svc.cluster.local", dns.RcodeSuccess, []string{"10.0.0.7"}},
		{"hl.ns.svc.cluster.local", dns.RcodeSuccess, []string{"127.9.0.1"}},
		{"all.ns.svc.cluster.local", dns.RcodeSuccess, []string{"127.9.0.1", "127.9.0.2", "127.9.0.3"}},
		{"other.ns.svc.cluster.local", dns.RcodeSuccess, nil},
		{"p0.hl.ns.svc.cluster.local", dns.RcodeSuccess, []string{"127.9.0.1"}},
		{"p2.all.ns.svc.cluster.local", dns.RcodeSuccess, []string{"127.9.0.3"}},
		// a pod's subdomain naming a ClusterIP Service gives it no record
		{"p1.web.ns.svc.cluster.local", dns.RcodeNameError, nil},
		// the hostname must be under the Service its subdomain names
		{"p0.all.ns.svc.cluster.local", dns.RcodeNameError, nil},
		{"nope.ns.svc.cluster.local", dns.RcodeNameError, nil},
		{"web.other-ns.svc.cluster.local", dns.RcodeNameError, nil},
		{"example.com", dns.RcodeRefused, nil},
	} {
		rc, ips := query(t, td.d.addr, tc.name)
		if rc != tc.rcode || len(ips) != len(tc.ips) {
			t.Errorf("%s: rcode %s %v, want %s %v", tc.name, dns.RcodeToString[rc], ips, dns.RcodeToString[tc.rcode], tc.ips)
			continue
		}
		for i := range ips {
			if ips[i] != tc.ips[i] {
				t.Errorf("%s: %v, want %v", tc.name, ips, tc.ips)
			}
		}
	}
}

// A pod's resolver tries its namespace's search list (ndots 5), as LWS_LEADER_ADDRESS
// (<lws>-<group>.<subdomain>.<ns>) is looked up; the node's resolver knows no cluster name.
func TestPodResolver(t *testing.T) {
	sel := map[string]string{"app": "m"}
	td := startTestDNS(t, headless("ns", "big", sel, true), clusterIPService("ns", "web", "10.0.0.9", sel))
	td.addPod(t, dnsPod("ns", "big-0", "big-0", "big", "127.9.1.1", false, sel))
	r := td.resolver("ns")
	ctx := context.Background()
	for name, want := range map[string]string{"big-0.big.ns": "127.9.1.1", "big-0.big": "127.9.1.1", "web": "10.0.0.9",
		"web.ns.svc.cluster.local.": "10.0.0.9", "127.0.0.5": "127.0.0.5"} {
		if got, err := r.lookup(ctx, name); err != nil || got != want {
			t.Errorf("lookup(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := r.lookup(ctx, "big-1.big.ns"); !errors.Is(err, errNoSuchHost) {
		t.Errorf("a pod that does not exist: %v", err)
	}
	if _, err := td.resolver("other").lookup(ctx, "web"); !errors.Is(err, errNoSuchHost) {
		t.Errorf("another namespace's search list found web: %v", err)
	}
	node := podDNS(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: v1.PodSpec{DNSPolicy: v1.DNSDefault}}, td.d.addr)
	if _, err := node.lookup(ctx, "big-0.big.ns"); !errors.Is(err, errNoSuchHost) {
		t.Errorf("dnsPolicy Default resolved a cluster name: %v", err)
	}
}
