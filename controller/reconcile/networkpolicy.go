// The NetworkPolicies that fence a model in (issue 49, finding 5): desired, one for the
// model's pods and one for its endpoint picker's; drift and set are the optional children's
// (optional.go). Pure: the isvc and the install's NetworkPolicyOptions decide every field.

package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// NetworkPolicyGVR is served by every cluster; whether its rules are enforced depends on the
// CNI, which the operator cannot see, so no status claims they are.
var NetworkPolicyGVR = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}

// KindNetworkPolicy is the model's policy; KindPickerNetworkPolicy its picker's (one kind,
// two names).
const (
	KindNetworkPolicy       = "NetworkPolicy"
	KindPickerNetworkPolicy = "PickerNetworkPolicy"
)

// namespaceNameLabel is the label the API server sets on every namespace to its name
// (NamespaceDefaultLabelName), so a peer can name one namespace.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// InstallComponents are the app.kubernetes.io/name of the install's pods that call model
// pods: the operator (model list, runtime LoRA), the activator (held requests) and the
// metrics adapter (scrapes /metrics).
var InstallComponents = []string{"inferenceservice-operator", "inferenceservice-activator", "inferenceservice-metrics-adapter"}

// NetworkPolicyPeer is a set of pods by namespace and labels; no labels: every pod of it.
type NetworkPolicyPeer struct {
	Namespace string
	Labels    map[string]string
}

// NetworkPolicyOptions are the install's side of the policies (the operator's flags).
type NetworkPolicyOptions struct {
	// Install is the namespace of the operator, the activator and the metrics adapter.
	Install string
	// Gateway is where the gateway's pods run: they reach the model's port and the picker's.
	// Empty Namespace: no gateway pod is admitted.
	Gateway NetworkPolicyPeer
	// Peers are more callers of the model's port (a Prometheus, a platform's proxy).
	Peers []NetworkPolicyPeer
}

// ParseNetworkPolicyPeer reads "namespace" or "namespace:key=value,key=value".
func ParseNetworkPolicyPeer(s string) (NetworkPolicyPeer, bool) {
	ns, sel, hasSel := strings.Cut(strings.TrimSpace(s), ":")
	p := NetworkPolicyPeer{Namespace: ns}
	if ns == "" {
		return p, false
	}
	if hasSel {
		p.Labels = map[string]string{}
		for _, kv := range strings.Split(sel, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return p, false
			}
			p.Labels[k] = v
		}
	}
	return p, true
}

// desiredNetworkPolicy admits to the model's pods only: its port from its own namespace
// (its picker, its tenant's clients), the install's components and the gateway; with
// multi-node, every port from the pods of its own LeaderWorkerSet, since Ray's raylet and
// object manager ports are random unless pinned (ray start's --node-manager-port and
// --object-manager-port default 0, workers 10002-19999) and the head's GCS is 6379
// (multi-node-serving.sh's --ray_port default); and nothing else from any pod.
func desiredNetworkPolicy(isvc *crd.InferenceService, ext *crd.SpecExtensions, o NetworkPolicyOptions) *unstructured.Unstructured {
	u := newChildUnstructured(isvc, "networking.k8s.io/v1", KindNetworkPolicy)
	from := []interface{}{
		// Alone, a podSelector means the policy's own namespace.
		map[string]interface{}{"podSelector": map[string]interface{}{}},
		installPeer(o.Install),
	}
	if o.Gateway.Namespace != "" {
		from = append(from, peerOf(o.Gateway))
	}
	for _, p := range o.Peers {
		from = append(from, peerOf(p))
	}
	rules := []interface{}{map[string]interface{}{
		"from":  from,
		"ports": []interface{}{tcpPort(Port)},
	}}
	if isMultiNode(ext) {
		rules = append(rules, map[string]interface{}{
			"from": []interface{}{map[string]interface{}{"podSelector": matchLabels(map[string]string{kinds.LWSNameLabel: isvc.Name})}},
		})
	}
	u.Object["spec"] = map[string]interface{}{
		"podSelector": matchLabels(selectorLabels(isvc.Name)),
		"policyTypes": []interface{}{"Ingress"},
		"ingress":     rules,
	}
	return u
}

// desiredPickerNetworkPolicy admits to the picker's pods only the gateway, on its ext_proc,
// health and metrics ports; without a gateway namespace, no pod at all (the node's kubelet
// still probes it: a pod cannot refuse its node).
func desiredPickerNetworkPolicy(isvc *crd.InferenceService, o NetworkPolicyOptions) *unstructured.Unstructured {
	u := unstructuredWith(pickerMeta(isvc), "networking.k8s.io/v1", KindNetworkPolicy)
	spec := map[string]interface{}{
		"podSelector": matchLabels(map[string]string{kinds.PickerLabel: isvc.Name}),
		"policyTypes": []interface{}{"Ingress"},
	}
	// No rule at all is stored without the key (omitempty): written so, it never drifts.
	if o.Gateway.Namespace != "" {
		spec["ingress"] = []interface{}{map[string]interface{}{
			"from":  []interface{}{peerOf(o.Gateway)},
			"ports": []interface{}{tcpPort(PickerGRPCPort), tcpPort(PickerHealthPort), tcpPort(PickerMetricsPort)},
		}}
	}
	u.Object["spec"] = spec
	return u
}

func installPeer(ns string) map[string]interface{} {
	return map[string]interface{}{
		"namespaceSelector": matchLabels(map[string]string{namespaceNameLabel: ns}),
		"podSelector": map[string]interface{}{"matchExpressions": []interface{}{map[string]interface{}{
			"key": "app.kubernetes.io/name", "operator": "In", "values": stringsOf(InstallComponents),
		}}},
	}
}

func peerOf(p NetworkPolicyPeer) map[string]interface{} {
	return map[string]interface{}{
		"namespaceSelector": matchLabels(map[string]string{namespaceNameLabel: p.Namespace}),
		"podSelector":       matchLabels(p.Labels),
	}
}

// matchLabels is a selector as the API server stores it: no matchLabels key when empty, so
// the cached object equals the desired one (no drift, no update loop).
func matchLabels(l map[string]string) map[string]interface{} {
	if len(l) == 0 {
		return map[string]interface{}{}
	}
	m := map[string]interface{}{}
	for k, v := range l {
		m[k] = v
	}
	return map[string]interface{}{"matchLabels": m}
}

// tcpPort writes the protocol the API server would default, for the same reason.
func tcpPort(n int64) map[string]interface{} {
	return map[string]interface{}{"protocol": "TCP", "port": n}
}

func stringsOf(s []string) []interface{} {
	out := make([]interface{}, 0, len(s))
	for _, v := range slices.Sorted(slices.Values(s)) {
		out = append(out, v)
	}
	return out
}

// NetworkPolicyOptionsOf reads the operator's flags: install is the install's namespace;
// gateway is a peer, "" for every pod of the Gateway's own namespace (gatewayParent's) or
// "none"; peers are more peers separated by ";".
func NetworkPolicyOptionsOf(install, gateway, peers string, gatewayParent string) (*NetworkPolicyOptions, error) {
	if install == "" {
		return nil, fmt.Errorf("--network-policy-install-namespace is empty: the operator, activator and metrics adapter could not reach the models")
	}
	o := &NetworkPolicyOptions{Install: install}
	switch gateway {
	case "none":
	case "":
		if ns, _, ok := strings.Cut(gatewayParent, "/"); ok {
			o.Gateway = NetworkPolicyPeer{Namespace: ns}
		}
	default:
		p, ok := ParseNetworkPolicyPeer(gateway)
		if !ok {
			return nil, fmt.Errorf("--network-policy-gateway=%q: want namespace or namespace:key=value,...", gateway)
		}
		o.Gateway = p
	}
	for _, s := range strings.Split(peers, ";") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		p, ok := ParseNetworkPolicyPeer(s)
		if !ok {
			return nil, fmt.Errorf("--network-policy-peers: %q: want namespace or namespace:key=value,...", s)
		}
		o.Peers = append(o.Peers, p)
	}
	return o, nil
}

// withCanaryPods widens the model's policy to its canary's pods (CanaryInstance), which serve
// the same port to the same callers. Only while a canary runs: a model without a rollout keeps
// the policy it always had, so an upgrade writes no policy.
func withCanaryPods(np *unstructured.Unstructured, name string) *unstructured.Unstructured {
	out := np.DeepCopy()
	_ = unstructured.SetNestedField(out.Object, map[string]interface{}{"matchExpressions": []interface{}{map[string]interface{}{
		"key": kinds.InstanceLabel, "operator": "In", "values": []interface{}{name, CanaryInstance(name)}}}}, "spec", "podSelector")
	return out
}
