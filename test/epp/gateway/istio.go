package main

// Istio mode (--istio): the gateway reaches an InferencePool's endpoint picker as Istio's
// gateway does. Istio originates TLS to a destination only when a DestinationRule for its host
// says so (trafficPolicy.tls, or portLevelSettings for the port); otherwise it sends plaintext.
// The picker (cmd/epp v1.5.0) serves TLS by default (--secure-serving=true, a self-signed
// certificate), so without a rule every ext_proc exchange fails, as on Istio, where the
// extension's chart ships a DestinationRule with tls mode SIMPLE and insecureSkipVerify.

import (
	"crypto/tls"
	"flag"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

var istioFlag = flag.Bool("istio", false, "Reach endpoint pickers as Istio does: plaintext unless a DestinationRule (networking.istio.io/v1) for the picker Service's host says TLS; --epp-insecure-skip-verify is then ignored.")

var destinationRuleGVR = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}

// istioMode is the gateway's Istio mode; off, rules is nil.
type istioMode struct {
	on    bool
	rules cache.GenericLister
}

// watchDestinationRules adds the DestinationRule informer in Istio mode.
func (g *gateway) watchDestinationRules(h cache.ResourceEventHandler, synced *[]cache.InformerSynced) error {
	if !g.istio.on {
		return nil
	}
	inf := g.factory.ForResource(destinationRuleGVR)
	if _, err := inf.Informer().AddEventHandler(h); err != nil {
		return err
	}
	g.istio.rules = inf.Lister()
	*synced = append(*synced, inf.Informer().HasSynced)
	return nil
}

// pickerConn is the connection to the picker at addr, Service ns/name port: in Istio mode as
// the DestinationRules say, else as --epp-insecure-skip-verify says.
func (g *gateway) pickerConn(ns, name string, port int64, addr string) (*grpc.ClientConn, error) {
	if !g.istio.on {
		return g.conn(addr)
	}
	objs, err := g.istio.rules.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	rules := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			rules = append(rules, u)
		}
	}
	host := name + "." + ns + ".svc.cluster.local"
	mode, skip, rule := upstreamTLS(rules, g.ns, ns, host, port)
	creds := insecure.NewCredentials()
	switch mode {
	case "", "DISABLE":
		mode = "DISABLE"
	case "SIMPLE":
		// Verified against the system's roots unless the rule skips it (no caCertificates
		// modelled): the picker's self-signed certificate passes only with insecureSkipVerify.
		creds = credentials.NewTLS(&tls.Config{ServerName: host, InsecureSkipVerify: skip}) //nolint:gosec // as the rule says
	default:
		// MUTUAL and ISTIO_MUTUAL present a client certificate the picker does not ask for,
		// and verify its certificate: not modelled beyond that verification, which fails.
		creds = credentials.NewTLS(&tls.Config{ServerName: host})
	}
	key := fmt.Sprintf("istio %s skip=%t %s", mode, skip, addr)
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.conns[key]; ok {
		return c, nil
	}
	g.log.Info("istio: dialing endpoint picker", "host", host, "addr", addr, "tls", mode, "insecureSkipVerify", skip, "destinationRule", rule)
	c, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds), grpc.WithNoProxy())
	if err != nil {
		return nil, err
	}
	g.conns[key] = c
	return c, nil
}

// upstreamTLS is the TLS a request to host:port gets from the DestinationRules, as Istio picks
// one rule per host: an exact host before a wildcard (the longest suffix), a rule in the
// gateway's namespace, then in the destination's, before one elsewhere, then the oldest; a
// host without a dot is qualified with its rule's namespace (Istio's short names). The port's portLevelSettings override the rule's trafficPolicy.
// It returns the mode ("" when no rule says), insecureSkipVerify and the rule's name.
func upstreamTLS(rules []*unstructured.Unstructured, gwNS, ns, host string, port int64) (mode string, skip bool, rule string) {
	type match struct {
		u        *unstructured.Unstructured
		exact    bool
		suffix   int
		nsRank   int // 0 the gateway's namespace, 1 the destination's, 2 another
		creation string
	}
	var ms []match
	for _, u := range rules {
		h, _, _ := unstructured.NestedString(u.Object, "spec", "host")
		if h != "" && !strings.Contains(h, ".") && h != "*" {
			h += "." + u.GetNamespace() + ".svc.cluster.local"
		}
		m := match{u: u, nsRank: 2, creation: u.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z")}
		switch u.GetNamespace() {
		case gwNS:
			m.nsRank = 0
		case ns:
			m.nsRank = 1
		}
		switch {
		case h == host:
			m.exact = true
		case strings.HasPrefix(h, "*") && strings.HasSuffix(host, h[1:]):
			m.suffix = len(h)
		default:
			continue
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return "", false, ""
	}
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if a.exact != b.exact {
			return a.exact
		}
		if a.suffix != b.suffix {
			return a.suffix > b.suffix
		}
		if a.nsRank != b.nsRank {
			return a.nsRank < b.nsRank
		}
		return a.creation < b.creation
	})
	u := ms[0].u
	tlsOf := func(m map[string]any) (string, bool, bool) {
		t, ok := m["tls"].(map[string]any)
		if !ok {
			return "", false, false
		}
		mode, _ := t["mode"].(string)
		skip, _ := t["insecureSkipVerify"].(bool)
		return mode, skip, true
	}
	tp, _, _ := unstructured.NestedMap(u.Object, "spec", "trafficPolicy")
	pls, _, _ := unstructured.NestedSlice(u.Object, "spec", "trafficPolicy", "portLevelSettings")
	for _, p := range pls {
		pm, _ := p.(map[string]any)
		num, _, _ := unstructured.NestedInt64(pm, "port", "number")
		if num == port {
			if mode, skip, ok := tlsOf(pm); ok {
				return mode, skip, u.GetNamespace() + "/" + u.GetName()
			}
		}
	}
	mode, skip, _ = tlsOf(tp)
	return mode, skip, u.GetNamespace() + "/" + u.GetName()
}
