// The Service proxy of --service-network, as kube-proxy's userspace mode was: a listener on
// each ClusterIP:port of the Services that select pods, each connection forwarded to one of
// the ready endpoints the EndpointSlice controller would publish (clusterdns.go computes
// them: the API server refuses EndpointSlices of loopback pod IPs), on the port targetPort
// names in the pod.

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// serviceProxy keeps one listener per ClusterIP:port.
type serviceProxy struct {
	dns       *clusterDNS // its Service lister and pod cache
	apiServer string      // host:port: default/kubernetes leads to it, as the API server's endpoints say
	// ingress finds a client's pod, whose IP the proxy dials from (netpol.go); nil: the node's.
	ingress   *netPolicies
	mu        sync.Mutex
	listeners map[string]*proxyListener // "ip:port"
}

type proxyListener struct {
	l         net.Listener
	namespace string
	name      string
	port      v1.ServicePort
}

// run syncs the listeners with the Services twice a second until ctx ends.
func (p *serviceProxy) run(ctx context.Context) {
	p.listeners = map[string]*proxyListener{}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		p.sync()
		select {
		case <-ctx.Done():
			p.mu.Lock()
			for _, pl := range p.listeners {
				pl.l.Close()
			}
			p.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// sync opens a listener for each TCP port of a Service with a ClusterIP, a selector and a
// ready endpoint, and closes those whose Service, port or endpoints went.
func (p *serviceProxy) sync() {
	svcs, err := p.dns.services.List(labels.Everything())
	if err != nil {
		return
	}
	want := map[string]*proxyListener{}
	for _, s := range svcs {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == v1.ClusterIPNone || (len(s.Spec.Selector) == 0 && !p.isAPIServer(s.Namespace, s.Name)) {
			continue
		}
		// No ready endpoint: no listener, so a client is refused, as kube-proxy's REJECT rule
		// answers for a Service without endpoints.
		if !p.isAPIServer(s.Namespace, s.Name) && len(p.dns.endpoints(s)) == 0 {
			continue
		}
		for _, port := range s.Spec.Ports {
			if port.Protocol != "" && port.Protocol != v1.ProtocolTCP {
				continue
			}
			want[net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(port.Port)))] = &proxyListener{namespace: s.Namespace, name: s.Name, port: port}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, pl := range p.listeners {
		if w, ok := want[addr]; !ok || w.namespace != pl.namespace || w.name != pl.name {
			pl.l.Close()
			delete(p.listeners, addr)
		} else {
			pl.port = w.port
		}
	}
	for addr, w := range want {
		if _, ok := p.listeners[addr]; ok {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			klog.ErrorS(err, "service proxy: cannot listen", "service", w.namespace+"/"+w.name, "addr", addr)
			continue
		}
		w.l = l
		p.listeners[addr] = w
		go p.accept(w)
	}
}

func (p *serviceProxy) accept(pl *proxyListener) {
	for {
		c, err := pl.l.Accept()
		if err != nil {
			return // closed
		}
		go p.forward(pl, c)
	}
}

// forward connects c to a ready endpoint of the Service, or closes it (its last endpoint went
// since the listener's sync).
func (p *serviceProxy) forward(pl *proxyListener, c net.Conn) {
	defer c.Close()
	p.mu.Lock()
	port := pl.port
	p.mu.Unlock()
	backend, err := p.endpoint(pl.namespace, pl.name, port)
	if err != nil {
		klog.V(2).InfoS("service proxy: no endpoint", "service", pl.namespace+"/"+pl.name, "err", err)
		return
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	if ip := p.ingress.clientIP(c); ip != nil {
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	b, err := d.Dial("tcp", backend)
	if err != nil {
		klog.V(2).InfoS("service proxy: endpoint unreachable", "service", pl.namespace+"/"+pl.name, "endpoint", backend, "err", err)
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); closeWrite(b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// isAPIServer: the default/kubernetes Service, whose endpoint is the API server (its endpoint
// reconciler is off here: it would write a loopback address, which Endpoints refuse).
func (p *serviceProxy) isAPIServer(ns, name string) bool {
	return ns == "default" && name == "kubernetes" && p.apiServer != ""
}

// endpoint picks one ready pod of the Service at random and the port targetPort names in it.
func (p *serviceProxy) endpoint(ns, name string, port v1.ServicePort) (string, error) {
	if p.isAPIServer(ns, name) {
		return p.apiServer, nil
	}
	svc, err := p.dns.services.Services(ns).Get(name)
	if err != nil {
		return "", err
	}
	var addrs []string
	for _, pod := range p.dns.endpoints(svc) {
		if n, ok := targetPort(pod, port); ok {
			addrs = append(addrs, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(n)))
		}
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("no ready endpoint")
	}
	return addrs[rand.IntN(len(addrs))], nil
}

// targetPort is the pod's port for the Service port: its number, or the container port of
// its name (a pod without that name is no endpoint for it); unset, the Service's port.
func targetPort(pod *v1.Pod, port v1.ServicePort) (int, bool) {
	switch {
	case port.TargetPort.IntValue() > 0:
		return port.TargetPort.IntValue(), true
	case port.TargetPort.StrVal == "":
		return int(port.Port), true
	}
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == port.TargetPort.StrVal && (cp.Protocol == "" || cp.Protocol == v1.ProtocolTCP) {
				return int(cp.ContainerPort), true
			}
		}
	}
	return 0, false
}
