// Cluster DNS: the records the Kubernetes DNS specification (cluster/addons/dns, schema 1.1.0)
// gives Services and pods, served over UDP and TCP on a loopback address, and the resolver the
// fake processes look names up with, through that server and nothing else.
//
// Why not CoreDNS itself: its kubernetes plugin reads a headless Service's pods from
// EndpointSlices, and the API server refuses EndpointSlices holding this world's pod IPs
// ("may not be in the loopback range (127.0.0.0/8, ::1/128)", ValidateEndpointIP), so it would
// answer NXDOMAIN for every pod. This server computes what the EndpointSlice controller would
// have published (ready pods selected by the Service, all of them with
// publishNotReadyAddresses, a hostname only where spec.subdomain names the Service) straight
// from the Services and pods.

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

const (
	clusterDomain = "cluster.local"
	dnsTTL        = 5 // seconds, CoreDNS's kubernetes plugin default
	// dnsNdots is the kubelet's ndots for ClusterFirst pods: fewer dots than this try the
	// search list first.
	dnsNdots = 5
)

// clusterDNS answers for cluster.local from the Services and pods it watches. Names outside
// the zone are refused: nothing is forwarded, no lookup leaves the machine.
type clusterDNS struct {
	services corelisters.ServiceLister
	pods     cache.Indexer // by namespace
	addr     string        // host:port, UDP and TCP
	udp, tcp *dns.Server
}

// startClusterDNS serves on host:port (port 0: a free one) once its caches are in sync.
func startClusterDNS(ctx context.Context, client kubernetes.Interface, host string, port int) (*clusterDNS, error) {
	f := informers.NewSharedInformerFactory(client, 0)
	podInf := f.Core().V1().Pods().Informer()
	// Only what a record needs is kept: thousands of pods cost little.
	if err := podInf.SetTransform(dnsPodTransform); err != nil {
		return nil, err
	}
	d := &clusterDNS{services: f.Core().V1().Services().Lister(), pods: podInf.GetIndexer()}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("cluster DNS: %v cache not synced", typ)
		}
	}
	pc, l, err := listenUDPAndTCP(host, port)
	if err != nil {
		return nil, fmt.Errorf("cluster DNS: %w", err)
	}
	d.addr = pc.LocalAddr().String()
	d.udp = &dns.Server{PacketConn: pc, Handler: d}
	d.tcp = &dns.Server{Listener: l, Handler: d}
	go func() { _ = d.udp.ActivateAndServe() }()
	go func() { _ = d.tcp.ActivateAndServe() }()
	go func() {
		<-ctx.Done()
		_ = d.udp.Shutdown()
		_ = d.tcp.Shutdown()
	}()
	return d, nil
}

// serveAlso answers on another address too (the Service network's 127.S.0.10:53, which a
// resolv.conf can name: it has no port), until ctx ends.
func (d *clusterDNS) serveAlso(ctx context.Context, host string, port int) error {
	pc, l, err := listenUDPAndTCP(host, port)
	if err != nil {
		return fmt.Errorf("cluster DNS on %s: %w", host, err)
	}
	udp, tcp := &dns.Server{PacketConn: pc, Handler: d}, &dns.Server{Listener: l, Handler: d}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	go func() {
		<-ctx.Done()
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
	}()
	return nil
}

// listenUDPAndTCP listens on host:port over UDP and TCP, as resolvers retry a truncated answer
// over TCP on the same port. With port 0 the port is UDP's free one, which TCP may hold for
// someone else (seen: another cluster's server on the same machine): another is drawn then.
func listenUDPAndTCP(host string, port int) (net.PacketConn, net.Listener, error) {
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, fmt.Sprint(port)))
		if err != nil {
			return nil, nil, err
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		if port != 0 || !errors.Is(err, syscall.EADDRINUSE) || attempt == 20 {
			return nil, nil, err
		}
	}
}

// dnsPodTransform keeps a pod's labels, hostname, subdomain, IP, readiness, deletion and
// container ports.
func dnsPodTransform(obj any) (any, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	out := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
		ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   v1.PodSpec{Hostname: p.Spec.Hostname, Subdomain: p.Spec.Subdomain},
		Status: v1.PodStatus{PodIP: p.Status.PodIP, Phase: p.Status.Phase}}
	// The container ports, by which a Service's named targetPort reaches it (serviceproxy.go).
	for _, c := range p.Spec.Containers {
		if len(c.Ports) > 0 {
			out.Spec.Containers = append(out.Spec.Containers, v1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			out.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: c.Status}}
		}
	}
	return out, nil
}

// ServeDNS answers A questions under the zone; AAAA and others get an empty answer for a name
// that exists (NODATA), as the plugin gives them in an IPv4 cluster.
func (d *clusterDNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	zone := clusterDomain + "."
	if name != zone && !strings.HasSuffix(name, "."+zone) {
		m.Authoritative = false
		m.Rcode = dns.RcodeRefused
		_ = w.WriteMsg(m)
		return
	}
	ips, found := d.records(strings.TrimSuffix(strings.TrimSuffix(name, zone), "."))
	switch {
	case !found:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{d.soa()}
	case q.Qtype == dns.TypeA:
		for _, ip := range ips {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: dnsTTL}, A: net.ParseIP(ip).To4()})
		}
	default:
		m.Ns = []dns.RR{d.soa()}
	}
	_ = w.WriteMsg(m)
}

func (d *clusterDNS) soa() dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: clusterDomain + ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: dnsTTL},
		Ns: "ns.dns." + clusterDomain + ".", Mbox: "hostmaster." + clusterDomain + ".", Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: dnsTTL}
}

// records is the addresses of a name relative to the zone ("svc.ns.svc", "host.svc.ns.svc");
// found false: NXDOMAIN. A name that exists with no address (a headless Service selecting no
// ready pod) is found with none.
func (d *clusterDNS) records(rel string) (ips []string, found bool) {
	labels := strings.Split(rel, ".")
	switch {
	case len(labels) == 3 && labels[2] == "svc":
		svc, err := d.services.Services(labels[1]).Get(labels[0])
		if err != nil {
			return nil, false
		}
		if svc.Spec.Type == v1.ServiceTypeExternalName {
			return nil, false // a CNAME, which nothing here asks for
		}
		if svc.Spec.ClusterIP != v1.ClusterIPNone {
			return []string{svc.Spec.ClusterIP}, svc.Spec.ClusterIP != ""
		}
		for _, p := range d.endpoints(svc) {
			ips = append(ips, p.Status.PodIP)
		}
		sort.Strings(ips)
		return ips, true
	case len(labels) == 4 && labels[3] == "svc":
		svc, err := d.services.Services(labels[2]).Get(labels[1])
		if err != nil || svc.Spec.ClusterIP != v1.ClusterIPNone {
			return nil, false // per-pod names exist only under a headless Service
		}
		for _, p := range d.endpoints(svc) {
			if p.Spec.Hostname == labels[0] && p.Spec.Subdomain == svc.Name {
				return []string{p.Status.PodIP}, true
			}
		}
	}
	return nil, false
}

// endpoints is what the EndpointSlice controller publishes for a headless Service: its
// selected pods with an IP, not terminating, ready unless the Service publishes the rest.
func (d *clusterDNS) endpoints(svc *v1.Service) []*v1.Pod {
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	objs, _ := d.pods.ByIndex(cache.NamespaceIndex, svc.Namespace)
	var out []*v1.Pod
	for _, o := range objs {
		p := o.(*v1.Pod)
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || !sel.Matches(labels.Set(p.Labels)) ||
			p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		if svc.Spec.PublishNotReadyAddresses || podIsReady(p) {
			out = append(out, p)
		}
	}
	return out
}

func podIsReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// errNoSuchHost is the resolver's NXDOMAIN, as getaddrinfo reports it.
var errNoSuchHost = errors.New("Name or service not known")

// podResolver is a ClusterFirst pod's resolv.conf: the cluster DNS server, the search list
// <ns>.svc.cluster.local svc.cluster.local cluster.local and ndots:5.
type podResolver struct {
	server    string
	namespace string
}

// lookup is getaddrinfo for an IPv4 address: a dotted address is itself; a name with fewer
// than ndots dots tries the search list first, then the name as given.
func (r podResolver) lookup(ctx context.Context, name string) (string, error) {
	if ip := net.ParseIP(name); ip != nil {
		return ip.String(), nil
	}
	if r.server == "" {
		return "", errNoSuchHost
	}
	var tries []string
	abs := strings.HasSuffix(name, ".")
	if !abs && strings.Count(name, ".") < dnsNdots {
		for _, s := range []string{r.namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain} {
			tries = append(tries, name+"."+s+".")
		}
	}
	tries = append(tries, dns.Fqdn(name))
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	for _, fqdn := range tries {
		m := new(dns.Msg)
		m.SetQuestion(fqdn, dns.TypeA)
		in, _, err := c.ExchangeContext(ctx, m, r.server)
		if err != nil {
			return "", fmt.Errorf("Temporary failure in name resolution: %w", err)
		}
		for _, rr := range in.Answer {
			if a, ok := rr.(*dns.A); ok {
				return a.A.String(), nil
			}
		}
	}
	return "", errNoSuchHost
}

// podDNS is the resolv.conf the kubelet writes for the pod's dnsPolicy: the cluster DNS for
// ClusterFirst (the default; with hostNetwork only as ClusterFirstWithHostNet), else the
// node's, which knows no cluster name (nor any other: nothing here leaves the machine).
func podDNS(p *v1.Pod, server string) podResolver {
	switch p.Spec.DNSPolicy {
	case v1.DNSClusterFirst, "":
		if p.Spec.HostNetwork {
			server = ""
		}
	case v1.DNSClusterFirstWithHostNet:
	default:
		server = ""
	}
	return podResolver{server: server, namespace: p.Namespace}
}

// Lookup is lookup, for the model servers (proc.Resolver).
func (r podResolver) Lookup(ctx context.Context, name string) (string, error) {
	return r.lookup(ctx, name)
}
