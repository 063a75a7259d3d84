package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

var (
	routeGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	poolGVR  = schema.GroupVersionResource{Group: PoolGroup, Version: "v1", Resource: "inferencepools"}
	svcGVR   = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	sliceGVR = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	grantGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1beta1", Resource: "referencegrants"}
	podGVR   = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// maxBody bounds a request body the gateway buffers (the picker reads the whole body).
const maxBody = 10 << 20

type gateway struct {
	log      *slog.Logger
	dyn      dynamic.Interface
	ns, name string
	m        *metrics
	eppTLS   *tls.Config // nil: plaintext
	upstream *http.Client
	// routeTimeout is a route's timeout when it sets none (Envoy's 15 s).
	routeTimeout        time.Duration
	pickTimeout         time.Duration
	factory             dynamicinformer.DynamicSharedInformerFactory
	routes, pools, svcs cache.GenericLister
	pods                cache.GenericLister
	// grants are the ReferenceGrants, nil where the CRD is not installed (then no route may
	// reference a backend in another namespace).
	grants  cache.GenericLister
	slices  cache.Indexer
	trigger chan struct{}
	// endpointRR turns the endpoints of a Service (a counter shared with the backends' choice
	// stepped them by two, so a Service's requests went to every other pod).
	endpointRR            atomic.Uint64
	mu                    sync.Mutex
	conns                 map[string]*grpc.ClientConn // picker address -> connection
	istio                 istioMode                   // --istio: reach pickers as Istio does (istio.go)
	stopInformers, cancel context.CancelFunc
}

func newGateway(log *slog.Logger, dyn dynamic.Interface, ns, name string, m *metrics, eppTLS *tls.Config, routeTimeout, pickTimeout time.Duration) *gateway {
	// No client-wide timeout: each request is bounded by its route's timeouts (timeouts.go).
	tr := &http.Transport{
		Proxy:               nil, // pods are loopback addresses; never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
	}
	return &gateway{
		log: log, dyn: dyn, ns: ns, name: name, m: m, eppTLS: eppTLS, pickTimeout: pickTimeout, routeTimeout: routeTimeout,
		upstream: &http.Client{Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		trigger: make(chan struct{}, 1),
		conns:   map[string]*grpc.ClientConn{},
	}
}

// start runs the informers (HTTPRoutes, InferencePools, Services, EndpointSlices, all
// namespaces), waits for their caches (a minute at most) and starts the status loop.
func (g *gateway) start(ctx context.Context) error {
	ictx, cancel := context.WithCancel(ctx)
	g.stopInformers = cancel
	g.factory = dynamicinformer.NewDynamicSharedInformerFactory(g.dyn, 0)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { g.kick() },
		UpdateFunc: func(any, any) { g.kick() },
		DeleteFunc: func(any) { g.kick() },
	}
	var synced []cache.InformerSynced
	for _, gvr := range []schema.GroupVersionResource{routeGVR, poolGVR, svcGVR} {
		inf := g.factory.ForResource(gvr)
		if _, err := inf.Informer().AddEventHandler(h); err != nil {
			return err
		}
		synced = append(synced, inf.Informer().HasSynced)
	}
	g.routes = g.factory.ForResource(routeGVR).Lister()
	g.pools = g.factory.ForResource(poolGVR).Lister()
	g.svcs = g.factory.ForResource(svcGVR).Lister()
	g.pods = g.factory.ForResource(podGVR).Lister()
	synced = append(synced, g.factory.ForResource(podGVR).Informer().HasSynced)
	sl := g.factory.ForResource(sliceGVR).Informer()
	if err := sl.AddIndexers(cache.Indexers{"service": func(obj any) ([]string, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, nil
		}
		return []string{u.GetNamespace() + "/" + u.GetLabels()["kubernetes.io/service-name"]}, nil
	}}); err != nil {
		return err
	}
	g.slices = sl.GetIndexer()
	synced = append(synced, sl.HasSynced)
	if _, err := g.dyn.Resource(grantGVR).List(ictx, metav1.ListOptions{Limit: 1}); err == nil {
		inf := g.factory.ForResource(grantGVR)
		if _, err := inf.Informer().AddEventHandler(h); err != nil {
			return err
		}
		g.grants = inf.Lister()
		synced = append(synced, inf.Informer().HasSynced)
	}
	if err := g.watchDestinationRules(h, &synced); err != nil {
		return err
	}
	g.factory.Start(ictx.Done())
	wctx, wcancel := context.WithTimeout(ictx, time.Minute)
	defer wcancel()
	if !cache.WaitForCacheSync(wctx.Done(), synced...) {
		return errors.New("informer caches not synced in 1m (are the HTTPRoute and InferencePool CRDs installed?)")
	}
	lctx, lcancel := context.WithCancel(ctx)
	g.cancel = lcancel
	go g.statusLoop(lctx)
	g.kick()
	return nil
}

func (g *gateway) close() {
	if g.cancel != nil {
		g.cancel()
	}
	if g.stopInformers != nil {
		g.stopInformers()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		_ = c.Close()
	}
}

func (g *gateway) kick() {
	select {
	case g.trigger <- struct{}{}:
	default:
	}
}

// ourRoutes are the HTTPRoutes whose parentRefs name our Gateway, with that parentRef.
func (g *gateway) ourRoutes() ([]*unstructured.Unstructured, []map[string]any) {
	objs, _ := g.routes.List(labelsEverything())
	var routes []*unstructured.Unstructured
	var refs []map[string]any
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if ref, ok := ParentsGateway(u, g.ns, g.name); ok {
			routes, refs = append(routes, u), append(refs, ref)
		}
	}
	return routes, refs
}

// ServeHTTP routes one request.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	routes, _ := g.ourRoutes()
	var rules []Rule
	for _, rt := range routes {
		rules = append(rules, Rules(rt)...)
	}
	rule, ok := Match(rules, r.URL.Path)
	if !ok {
		http.Error(w, fmt.Sprintf("no HTTPRoute of Gateway %s/%s matches %s", g.ns, g.name, r.URL.Path), http.StatusNotFound)
		return
	}
	be, ok := g.chooseBackend(rule.Backends)
	if !ok {
		http.Error(w, "route "+rule.Route+" has no backend", http.StatusInternalServerError)
		return
	}
	if routeNS, _, _ := strings.Cut(rule.Route, "/"); !g.permitted(routeNS, be) {
		// As the Gateway API says of a backendRef that cannot be resolved: 500.
		http.Error(w, fmt.Sprintf("route %s: backendRef %s not permitted (no ReferenceGrant)", rule.Route, be), http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxBody {
		http.Error(w, "request body over 10 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	path := rule.RewritePath(r.URL.Path)
	setHeaders := map[string]string{}
	for k, v := range rule.SetHeaders {
		setHeaders[k] = v
	}
	var endpoint, kind string
	switch {
	case be.IsService():
		kind = "Service"
		eps, err := g.serviceEndpoints(be.Namespace, be.Name, be.Port)
		if err != nil || len(eps) == 0 {
			http.Error(w, fmt.Sprintf("Service %s/%s: no ready endpoint (%v)", be.Namespace, be.Name, err), http.StatusServiceUnavailable)
			return
		}
		endpoint = eps[int(g.endpointRR.Add(1)-1)%len(eps)]
	case be.IsPool():
		kind = "InferencePool"
		p, status, err := g.pickFromPool(r.Context(), be, r, path, body)
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		endpoint, body = p.Endpoint, p.Body
		for k, v := range p.SetHeaders {
			setHeaders[k] = v
		}
	default:
		http.Error(w, fmt.Sprintf("backend %s: unsupported kind", be), http.StatusInternalServerError)
		return
	}
	g.forward(w, r, kind, endpoint, path, setHeaders, body, rule.Timeouts.Bound(g.routeTimeout))
}

// chooseBackend picks among the rule's backends by weight as Envoy's weighted clusters do: a
// draw per request below the total weight, the backend whose cumulative weight it falls under.
// (A counter stepping through the total, as before, sent a weight's requests in one run: at
// 80/20 a short window went all to the first, and a counter shared by every rule let another
// route's requests in between decide which backend a rule got.) Weight 0 gets none.
func (g *gateway) chooseBackend(bs []Backend) (Backend, bool) {
	var total int64
	for _, b := range bs {
		total += max(b.Weight, 0)
	}
	if total == 0 {
		return Backend{}, false
	}
	n := rand.Int64N(total)
	for _, b := range bs {
		if n < max(b.Weight, 0) {
			return b, true
		}
		n -= max(b.Weight, 0)
	}
	return Backend{}, false
}

// serviceEndpoints are the ready IP:port endpoints of the Service's port (the Service port
// number): from its EndpointSlices where there are any (the port mapped by name); else, for an
// ExternalName Service whose externalName is an IP, that IP at the port (how the local cluster
// registers a server outside its pods); else from the Ready pods its selector matches, at the
// port's targetPort (the local cluster has no EndpointSlices: the API server refuses loopback
// pod IPs in them, so its DNS reads pods too).
func (g *gateway) serviceEndpoints(ns, name string, port int64) ([]string, error) {
	obj, err := g.svcs.ByNamespace(ns).Get(name)
	if err != nil {
		return nil, err
	}
	svc := obj.(*unstructured.Unstructured)
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var sp map[string]any
	for _, p := range ports {
		pm, _ := p.(map[string]any)
		if toInt(pm["port"]) == port || (port == 0 && len(ports) == 1) {
			sp = pm
			break
		}
	}
	if typ, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); typ == "ExternalName" {
		ext, _, _ := unstructured.NestedString(svc.Object, "spec", "externalName")
		if net.ParseIP(ext) == nil {
			return nil, fmt.Errorf("Service %s/%s: externalName %q is not an IP (no DNS here)", ns, name, ext)
		}
		if port == 0 {
			return nil, fmt.Errorf("Service %s/%s: ExternalName needs the backend's port", ns, name)
		}
		return []string{net.JoinHostPort(ext, strconv.FormatInt(port, 10))}, nil
	}
	if sp == nil {
		return nil, fmt.Errorf("Service %s/%s has no port %d", ns, name, port)
	}
	portName, _ := sp["name"].(string)
	slices, err := g.slices.ByIndex("service", ns+"/"+name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range slices {
		s := o.(*unstructured.Unstructured)
		sports, _, _ := unstructured.NestedSlice(s.Object, "ports")
		target := int64(-1)
		for _, p := range sports {
			pm, _ := p.(map[string]any)
			if n, _ := pm["name"].(string); n == portName {
				target = toInt(pm["port"])
			}
		}
		if target < 0 {
			continue
		}
		eps, _, _ := unstructured.NestedSlice(s.Object, "endpoints")
		for _, e := range eps {
			em, _ := e.(map[string]any)
			if ready, found, _ := unstructured.NestedBool(em, "conditions", "ready"); found && !ready {
				continue
			}
			addrs, _, _ := unstructured.NestedStringSlice(em, "addresses")
			if len(addrs) > 0 {
				out = append(out, net.JoinHostPort(addrs[0], strconv.FormatInt(target, 10)))
			}
		}
	}
	if len(slices) > 0 {
		sort.Strings(out)
		return out, nil
	}
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if len(sel) == 0 {
		return nil, nil
	}
	pods, err := g.pods.ByNamespace(ns).List(labels.SelectorFromSet(sel))
	if err != nil {
		return nil, err
	}
	for _, o := range pods {
		pod := o.(*unstructured.Unstructured)
		ip, ok := readyPodIP(pod)
		if !ok {
			continue
		}
		if tp := targetPort(pod, sp); tp > 0 {
			out = append(out, net.JoinHostPort(ip, strconv.FormatInt(tp, 10)))
		}
	}
	sort.Strings(out)
	return out, nil
}

// readyPodIP is the pod's IP when it is Ready and not being deleted.
func readyPodIP(pod *unstructured.Unstructured) (string, bool) {
	ip, _, _ := unstructured.NestedString(pod.Object, "status", "podIP")
	if ip == "" || pod.GetDeletionTimestamp() != nil {
		return "", false
	}
	conds, _, _ := unstructured.NestedSlice(pod.Object, "status", "conditions")
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["type"] == "Ready" && cm["status"] == "True" {
			return ip, true
		}
	}
	return "", false
}

// targetPort is the Service port's targetPort on pod: a number, or a container port's name
// (default: the port itself).
func targetPort(pod *unstructured.Unstructured, sp map[string]any) int64 {
	switch tp := sp["targetPort"].(type) {
	case string:
		containers, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
		for _, c := range containers {
			cm, _ := c.(map[string]any)
			ports, _, _ := unstructured.NestedSlice(cm, "ports")
			for _, p := range ports {
				pm, _ := p.(map[string]any)
				if pm["name"] == tp {
					return toInt(pm["containerPort"])
				}
			}
		}
		return 0
	case nil:
		return toInt(sp["port"])
	default:
		return toInt(tp)
	}
}

// pickFromPool asks the pool's endpoint picker for the endpoint; on failure FailClose answers
// 503, FailOpen falls back to a Ready pod of the pool.
func (g *gateway) pickFromPool(ctx context.Context, be Backend, r *http.Request, path string, body []byte) (Picked, int, error) {
	obj, err := g.pools.ByNamespace(be.Namespace).Get(be.Name)
	if err != nil {
		return Picked{}, http.StatusInternalServerError, fmt.Errorf("InferencePool %s/%s: %w", be.Namespace, be.Name, err)
	}
	pool := obj.(*unstructured.Unstructured)
	eppName, _, _ := unstructured.NestedString(pool.Object, "spec", "endpointPickerRef", "name")
	eppPort, _, _ := unstructured.NestedInt64(pool.Object, "spec", "endpointPickerRef", "port", "number")
	mode, _, _ := unstructured.NestedString(pool.Object, "spec", "endpointPickerRef", "failureMode")
	if mode == "" {
		mode = "FailClose"
	}
	poolID := be.Namespace + "/" + be.Name
	p, err := func() (Picked, error) {
		eps, err := g.serviceEndpoints(be.Namespace, eppName, eppPort)
		if err != nil {
			return Picked{}, fmt.Errorf("picker Service %s: %w", eppName, err)
		}
		if len(eps) == 0 {
			return Picked{}, fmt.Errorf("picker Service %s has no ready endpoint", eppName)
		}
		conn, err := g.pickerConn(be.Namespace, eppName, eppPort, eps[0])
		if err != nil {
			return Picked{}, err
		}
		pctx, cancel := context.WithTimeout(ctx, g.pickTimeout)
		defer cancel()
		start := time.Now()
		p, err := Pick(pctx, extprocv3.NewExternalProcessorClient(conn), r, path, body)
		g.m.extProcTime.WithLabelValues(poolID).Observe(time.Since(start).Seconds())
		if err != nil {
			return p, fmt.Errorf("picker %s (%s): %w", eppName, eps[0], err)
		}
		return p, nil
	}()
	if err == nil {
		return p, 0, nil
	}
	g.m.pickerErrors.WithLabelValues(poolID, mode).Inc()
	g.log.Warn("endpoint picker failed", "pool", poolID, "failureMode", mode, "err", err)
	if mode != "FailOpen" {
		return Picked{}, http.StatusServiceUnavailable, fmt.Errorf("InferencePool %s (FailClose): endpoint picker unavailable: %v", poolID, err)
	}
	ep, ferr := g.anyPoolPod(pool)
	if ferr != nil {
		return Picked{}, http.StatusServiceUnavailable, fmt.Errorf("InferencePool %s (FailOpen): picker failed (%v) and no pod to fall back to: %v", poolID, err, ferr)
	}
	return Picked{Endpoint: ep, SetHeaders: map[string]string{}, Body: body}, 0, nil
}

// anyPoolPod is a Ready pod of the pool, at its first target port (FailOpen's fallback).
func (g *gateway) anyPoolPod(pool *unstructured.Unstructured) (string, error) {
	sel, _, _ := unstructured.NestedStringMap(pool.Object, "spec", "selector", "matchLabels")
	ports, _, _ := unstructured.NestedSlice(pool.Object, "spec", "targetPorts")
	if len(ports) == 0 || len(sel) == 0 {
		return "", errors.New("no targetPorts or selector")
	}
	pm, _ := ports[0].(map[string]any)
	port := toInt(pm["number"])
	pods, err := g.pods.ByNamespace(pool.GetNamespace()).List(labels.SelectorFromSet(sel))
	if err != nil {
		return "", err
	}
	var ready []string
	for _, o := range pods {
		if ip, ok := readyPodIP(o.(*unstructured.Unstructured)); ok {
			ready = append(ready, net.JoinHostPort(ip, strconv.FormatInt(port, 10)))
		}
	}
	if len(ready) == 0 {
		return "", errors.New("no Ready pod")
	}
	sort.Strings(ready)
	return ready[int(g.endpointRR.Add(1)-1)%len(ready)], nil
}

// conn is a cached gRPC connection to a picker (TLS without verification, or plaintext),
// straight to the address: no resolver, no proxy.
func (g *gateway) conn(addr string) (*grpc.ClientConn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.conns[addr]; ok {
		return c, nil
	}
	creds := insecure.NewCredentials()
	if g.eppTLS != nil {
		creds = credentials.NewTLS(g.eppTLS.Clone())
	}
	c, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds), grpc.WithNoProxy())
	if err != nil {
		return nil, err
	}
	g.conns[addr] = c
	return c, nil
}

// hopHeaders are not forwarded.
var hopHeaders = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true, "te": true,
	"trailer": true, "transfer-encoding": true, "upgrade": true, "content-length": true}

// forward sends the request to endpoint and streams the response back, naming the endpoint
// in DestinationHeader, within the route's timeout as Envoy keeps it (timeouts.go): a 504
// before the response's headers, the stream cut after.
func (g *gateway) forward(w http.ResponseWriter, r *http.Request, kind, endpoint, path string, setHeaders map[string]string, body []byte, timeout time.Duration) {
	u := "http://" + endpoint + path
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	ctx, cancel, timedOut := withRouteTimeout(r.Context(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, u, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for k, vs := range r.Header {
		if !hopHeaders[strings.ToLower(k)] {
			req.Header[k] = append([]string(nil), vs...)
		}
	}
	for k, v := range setHeaders {
		if !strings.HasPrefix(k, ":") && !hopHeaders[k] {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set("X-Forwarded-For", strings.Split(r.RemoteAddr, ":")[0])
	res, err := g.upstream.Do(req)
	if err != nil && timedOut() {
		g.m.requests.WithLabelValues(kind, endpoint, "504").Inc()
		g.log.Info("upstream request timeout", "route timeout", timeout, "endpoint", endpoint, "path", path)
		writeUpstreamTimeout(w)
		return
	}
	if err != nil {
		g.m.upstreamError.WithLabelValues(kind).Inc()
		g.m.requests.WithLabelValues(kind, endpoint, "502").Inc()
		w.Header().Set(DestinationHeader, endpoint)
		http.Error(w, fmt.Sprintf("upstream %s: %v", endpoint, err), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for k, vs := range res.Header {
		if !hopHeaders[strings.ToLower(k)] {
			w.Header()[k] = vs
		}
	}
	w.Header().Set(DestinationHeader, endpoint)
	w.WriteHeader(res.StatusCode)
	g.m.requests.WithLabelValues(kind, endpoint, strconv.Itoa(res.StatusCode)).Inc()
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush() // streamed completions (SSE) reach the client as they come
			}
		}
		if err != nil {
			if timedOut() {
				// Envoy resets a stream whose response had begun: the client sees it end
				// without its last chunk, not a clean end.
				g.log.Info("upstream request timeout after the response began: stream reset", "route timeout", timeout, "endpoint", endpoint, "path", path)
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
}

// statusLoop writes the status of our routes and their pools after every change seen.
func (g *gateway) statusLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.trigger:
		}
		if err := g.writeStatuses(ctx); err != nil {
			g.log.Warn("status", "err", err)
			time.AfterFunc(time.Second, g.kick) // retry (a conflict, a stale cache)
		}
	}
}

func (g *gateway) writeStatuses(ctx context.Context) error {
	routes, refs := g.ourRoutes()
	var errs []error
	pools := map[string]bool{}
	for i, rt := range routes {
		resolved, reason, msg := true, "ResolvedRefs", "all backends resolved"
		for _, rule := range Rules(rt) {
			for _, be := range rule.Backends {
				switch {
				case !g.permitted(rt.GetNamespace(), be):
					resolved, reason, msg = false, "RefNotPermitted", fmt.Sprintf("backendRef %s is in another namespace and no ReferenceGrant there permits HTTPRoutes of %s to reference it", be, rt.GetNamespace())
				case be.IsService():
					if _, err := g.svcs.ByNamespace(be.Namespace).Get(be.Name); err != nil {
						resolved, reason, msg = false, "BackendNotFound", fmt.Sprintf("Service %s/%s not found", be.Namespace, be.Name)
					}
				case be.IsPool():
					pools[be.Namespace+"/"+be.Name] = true
					if _, err := g.pools.ByNamespace(be.Namespace).Get(be.Name); err != nil {
						resolved, reason, msg = false, "BackendNotFound", fmt.Sprintf("InferencePool %s/%s not found", be.Namespace, be.Name)
					}
				default:
					resolved, reason, msg = false, "InvalidKind", fmt.Sprintf("backend %s: unsupported group/kind", be)
				}
			}
		}
		ref := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": g.name, "namespace": g.ns}
		if sn, ok := refs[i]["sectionName"]; ok {
			ref["sectionName"] = sn
		}
		conds := []any{
			condition("Accepted", true, "Accepted", "route attached to Gateway "+g.ns+"/"+g.name, rt.GetGeneration()),
			condition("ResolvedRefs", resolved, reason, msg, rt.GetGeneration()),
		}
		entry := map[string]any{"parentRef": ref, "controllerName": ControllerName, "conditions": conds}
		if err := g.setParentStatus(ctx, routeGVR, rt, entry); err != nil {
			errs = append(errs, err)
		}
	}
	for key := range pools {
		ns, name, _ := strings.Cut(key, "/")
		obj, err := g.pools.ByNamespace(ns).Get(name)
		if err != nil {
			continue
		}
		pool := obj.(*unstructured.Unstructured)
		eppName, _, _ := unstructured.NestedString(pool.Object, "spec", "endpointPickerRef", "name")
		resolved, reason, msg := true, "ResolvedRefs", "endpoint picker Service "+eppName+" found"
		if _, err := g.svcs.ByNamespace(ns).Get(eppName); err != nil {
			resolved, reason, msg = false, "InvalidExtensionRef", "endpoint picker Service "+eppName+" not found"
		}
		ref := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": g.name, "namespace": g.ns}
		entry := map[string]any{"parentRef": ref, "conditions": []any{
			condition("Accepted", true, "Accepted", "referenced by an HTTPRoute of Gateway "+g.ns+"/"+g.name, pool.GetGeneration()),
			condition("ResolvedRefs", resolved, reason, msg, pool.GetGeneration()),
		}}
		if err := g.setParentStatus(ctx, poolGVR, pool, entry); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func condition(typ string, ok bool, reason, msg string, gen int64) map[string]any {
	s := "False"
	if ok {
		s = "True"
	}
	return map[string]any{"type": typ, "status": s, "reason": reason, "message": msg,
		"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

// setParentStatus puts entry into obj's status.parents in place of the entry for the same
// parentRef, keeping a condition's lastTransitionTime while its status holds, and writes the
// status only when it changed.
func (g *gateway) setParentStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, entry map[string]any) error {
	parents, _, _ := unstructured.NestedSlice(obj.Object, "status", "parents")
	ref := entry["parentRef"].(map[string]any)
	out := make([]any, 0, len(parents)+1)
	var old map[string]any
	for _, p := range parents {
		pm, _ := p.(map[string]any)
		pr, _ := pm["parentRef"].(map[string]any)
		if pr["name"] == ref["name"] && (pr["namespace"] == ref["namespace"] || pr["namespace"] == nil && obj.GetNamespace() == ref["namespace"]) {
			old = pm
			continue
		}
		out = append(out, p)
	}
	if old != nil {
		oldConds, _ := old["conditions"].([]any)
		for _, c := range entry["conditions"].([]any) {
			cm := c.(map[string]any)
			for _, oc := range oldConds {
				ocm, _ := oc.(map[string]any)
				if ocm["type"] == cm["type"] && ocm["status"] == cm["status"] {
					cm["lastTransitionTime"] = ocm["lastTransitionTime"]
				}
			}
		}
		if reflect.DeepEqual(normalize(old), normalize(entry)) {
			return nil
		}
	}
	out = append(out, entry)
	u := obj.DeepCopy()
	if err := unstructured.SetNestedSlice(u.Object, out, "status", "parents"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := g.dyn.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(wctx, u, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("%s %s/%s status: %w", gvr.Resource, u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// normalize makes a JSON-ish value comparable whatever its number types (int64 written,
// int64 or float64 read back).
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = normalize(e)
		}
		return s
	case int64, int, float64:
		return fmt.Sprint(toInt(x))
	}
	return v
}

// permitted is the Gateway API's rule for a route's backendRef: one in the route's namespace,
// or one a ReferenceGrant in the backend's namespace lets HTTPRoutes of the route's namespace
// reference (its to entry naming the kind, and the name unless it names none).
func (g *gateway) permitted(routeNS string, be Backend) bool {
	if be.Namespace == routeNS {
		return true
	}
	if g.grants == nil {
		return false
	}
	objs, err := g.grants.ByNamespace(be.Namespace).List(labelsEverything())
	if err != nil {
		return false
	}
	kind := be.Kind
	if kind == "" {
		kind = "Service"
	}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if GrantPermits(u, routeNS, be.Group, kind, be.Name) {
			return true
		}
	}
	return false
}
