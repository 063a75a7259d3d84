// Probes that probe: a serving container's startup, readiness and liveness probes, run against
// its fake model server with the kubelet's own probers (pkg/probe/http, pkg/probe/tcp) and the
// rules of its prober workers (pkg/kubelet/prober/worker.go), one goroutine and one timer per
// container. Results go to the pod worker only when they change.

package main

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/probe"
	grpcprobe "k8s.io/kubernetes/pkg/probe/grpc"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"
	tcpprobe "k8s.io/kubernetes/pkg/probe/tcp"
)

const (
	probeStartup   = "Startup"
	probeReadiness = "Readiness"
	probeLiveness  = "Liveness"
)

// probers are the kubelet's, shared by every container as the kubelet shares them.
type probers struct {
	http httpprobe.Prober
	tcp  tcpprobe.Prober
	grpc grpcprobe.Prober
}

func newProbers() probers {
	return probers{http: httpprobe.New(false), tcp: tcpprobe.New(), grpc: grpcprobe.New()}
}

// probeWorker is one probe of one container run: its schedule and its threshold counters.
type probeWorker struct {
	kind      string
	p         *v1.Probe
	next      time.Time // zero: not running (readiness and liveness until started)
	lastOK    bool
	run       int
	published bool // the result the pod worker has
}

// containerProber probes one container run until stop is closed or it reports a kill.
type containerProber struct {
	probers   probers
	rec       record.EventRecorder
	ref       *v1.ObjectReference
	spec      v1.Container
	ip        string
	grpc      bool // grpc probes call grpc.health.v1 Check (an exec image's process); else the port answering is the health
	startedAt time.Time
	started   bool // the status says started (no startup probe, or restored)
	ready     bool // the readiness result it starts from (restored)
	report    func(kind string, ok bool) bool
	stop      <-chan struct{}
}

func threshold(n int32) int {
	if n < 1 {
		return 1
	}
	return int(n)
}

func probeTimeout(p *v1.Probe) time.Duration {
	if p.TimeoutSeconds > 0 {
		return time.Duration(p.TimeoutSeconds) * time.Second
	}
	return time.Second
}

func (cp *containerProber) run() {
	var startup, readiness, liveness *probeWorker
	if p := cp.spec.StartupProbe; p != nil && !cp.started {
		startup = &probeWorker{kind: probeStartup, p: p, next: cp.startedAt.Add(probeDelay(p))}
	}
	if p := cp.spec.ReadinessProbe; p != nil {
		readiness = &probeWorker{kind: probeReadiness, p: p, published: cp.ready, lastOK: cp.ready}
	}
	if p := cp.spec.LivenessProbe; p != nil {
		liveness = &probeWorker{kind: probeLiveness, p: p, published: true, lastOK: true}
	}
	// Readiness and liveness wait for started: the first tick one period after the kubelet
	// wrote started (at once without a startup probe), not before initialDelaySeconds.
	schedule := func(startedAt time.Time, afterStartup bool) {
		for _, w := range []*probeWorker{readiness, liveness} {
			if w == nil {
				continue
			}
			notBefore := cp.startedAt.Add(probeDelay(w.p))
			if afterStartup {
				w.next = tickAtOrAfter(startedAt.Add(probePeriod(w.p)), probePeriod(w.p), notBefore)
			} else {
				w.next = maxTime(notBefore, startedAt)
			}
		}
	}
	if startup == nil {
		schedule(time.Now(), false)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var w *probeWorker
		for _, c := range []*probeWorker{startup, readiness, liveness} {
			if c != nil && !c.next.IsZero() && (w == nil || c.next.Before(w.next)) {
				w = c
			}
		}
		if w == nil {
			<-cp.stop
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(w.next))
		select {
		case <-cp.stop:
			return
		case <-timer.C:
		}
		ok := cp.probe(w)
		now := time.Now()
		w.next = tickAtOrAfter(w.next.Add(probePeriod(w.p)), probePeriod(w.p), now)
		if ok == w.lastOK {
			w.run++
		} else {
			w.lastOK, w.run = ok, 1
		}
		if (!ok && w.run < threshold(w.p.FailureThreshold)) || (ok && w.run < threshold(w.p.SuccessThreshold)) {
			continue // below its threshold: the result stays
		}
		switch w.kind {
		case probeStartup:
			if !cp.report(probeStartup, ok) || !ok {
				return // killed: the next run gets a new prober
			}
			startup = nil
			schedule(now, true)
		case probeReadiness:
			if ok != w.published {
				w.published = ok
				if !cp.report(probeReadiness, ok) {
					return
				}
			}
		case probeLiveness:
			if !ok {
				cp.report(probeLiveness, false)
				return
			}
		}
	}
}

// probe runs one probe and records its Unhealthy event as the kubelet's prober does.
func (cp *containerProber) probe(w *probeWorker) bool {
	res, out, err := cp.do(w.p)
	switch {
	case err != nil:
		cp.rec.Eventf(cp.ref, v1.EventTypeWarning, "Unhealthy", "%s probe errored and resulted in %s state: %s", w.kind, probe.Unknown, err)
		return false
	case res == probe.Warning:
		cp.rec.Eventf(cp.ref, v1.EventTypeWarning, "ProbeWarning", "%s probe warning: %s", w.kind, out)
		return true
	case res == probe.Success:
		return true
	}
	cp.rec.Eventf(cp.ref, v1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", w.kind, out)
	return false
}

// loopbackHost keeps a probe's host on this machine: a loopback IP as given, anything else
// (a name, a routable address) is the pod IP, where the kubelet's default sends it.
func (cp *containerProber) loopbackHost(h string) string {
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return h
	}
	return cp.ip
}

func (cp *containerProber) do(p *v1.Probe) (probe.Result, string, error) {
	timeout := probeTimeout(p)
	switch {
	case p.HTTPGet != nil:
		get := *p.HTTPGet
		get.Host = cp.loopbackHost(get.Host)
		req, err := httpprobe.NewRequestForHTTPGetAction(&get, &cp.spec, cp.ip, "probe")
		if err != nil {
			return probe.Unknown, "", err
		}
		return cp.probers.http.Probe(req, timeout)
	case p.TCPSocket != nil:
		port, err := probe.ResolveContainerPort(p.TCPSocket.Port, &cp.spec)
		if err != nil {
			return probe.Unknown, "", err
		}
		return cp.probers.tcp.Probe(cp.loopbackHost(p.TCPSocket.Host), port, timeout)
	case p.GRPC != nil && cp.grpc:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return cp.probers.grpc.Probe(cp.ip, service, int(p.GRPC.Port), timeout, grpcprobe.ProbeOptions{})
	case p.GRPC != nil:
		// No gRPC health service in the fake server: the port answering is the health.
		res, _, err := cp.probers.tcp.Probe(cp.ip, int(p.GRPC.Port), timeout)
		if err != nil || res != probe.Success {
			return probe.Failure, fmt.Sprintf("timeout: failed to connect service %q within %s", net.JoinHostPort(cp.ip, strconv.Itoa(int(p.GRPC.Port))), timeout), nil
		}
		return probe.Success, "", nil
	case p.Exec != nil:
		return cp.exec(p.Exec.Command, timeout)
	}
	return probe.Success, "", nil
}

var localURL = regexp.MustCompile(`(https?)://(localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\])(:\d+)?(/[^\s'"]*)?`)

// exec runs what an exec probe's command does to the server: curl or wget of a localhost
// URL is that GET to the pod IP, failing as curl -f / wget report it; any other command
// succeeds (the fake runs no processes).
func (cp *containerProber) exec(cmd []string, timeout time.Duration) (probe.Result, string, error) {
	line := strings.Join(cmd, " ")
	tool := ""
	switch {
	case strings.Contains(line, "curl"):
		tool = "curl"
	case strings.Contains(line, "wget"):
		tool = "wget"
	}
	m := localURL.FindStringSubmatch(line)
	if tool == "" || m == nil {
		return probe.Success, "", nil
	}
	port := 80
	if m[1] == "https" {
		port = 443
	}
	if m[3] != "" {
		port, _ = strconv.Atoi(m[3][1:])
	}
	path := m[4]
	if path == "" {
		path = "/"
	}
	get := &v1.HTTPGetAction{Path: path, Port: intstr.FromInt(port), Host: cp.ip, Scheme: v1.URIScheme(strings.ToUpper(m[1]))}
	req, err := httpprobe.NewRequestForHTTPGetAction(get, &cp.spec, cp.ip, "probe")
	if err != nil {
		return probe.Unknown, "", err
	}
	res, out, _ := cp.probers.http.Probe(req, timeout)
	if res != probe.Failure {
		return probe.Success, "", nil
	}
	host := m[2]
	code, status := "", ""
	if c, ok := strings.CutPrefix(out, "HTTP probe failed with statuscode: "); ok {
		code = c
		if n, err := strconv.Atoi(c); err == nil {
			status = c + " " + http.StatusText(n)
		}
	}
	switch {
	case tool == "curl" && code != "":
		return probe.Failure, fmt.Sprintf("curl: (22) The requested URL returned error: %s\n", code), nil
	case tool == "curl":
		return probe.Failure, fmt.Sprintf("curl: (7) Failed to connect to %s port %d after 0 ms: Couldn't connect to server\n", host, port), nil
	case code != "":
		return probe.Failure, fmt.Sprintf("wget: server returned error: HTTP/1.1 %s\n", status), nil
	}
	return probe.Failure, fmt.Sprintf("wget: can't connect to remote host (%s): Connection refused\n", host), nil
}
