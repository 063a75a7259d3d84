package reconcile

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

func npOptions() *NetworkPolicyOptions {
	return &NetworkPolicyOptions{Install: "inferenceservice-system",
		Gateway: NetworkPolicyPeer{Namespace: "gw", Labels: map[string]string{"app": "envoy"}},
		Peers:   []NetworkPolicyPeer{{Namespace: "monitoring"}}}
}

// typedNP reads a desired policy as the API server would decode it: a field of the wrong
// shape or name fails here, not on a cluster.
func typedNP(t *testing.T, u *unstructured.Unstructured) *networkingv1.NetworkPolicy {
	t.Helper()
	var np networkingv1.NetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &np, true); err != nil {
		t.Fatalf("%s: %v", u.GetName(), err)
	}
	return &np
}

// stored is the policy as the API server returns it (typed, then JSON, then the dynamic
// client's decoding): what the informer's cache holds.
func stored(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	b, err := json.Marshal(typedNP(t, u))
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return out
}

// peers renders a rule's sources as "ns-selector/pod-selector" strings, ports as numbers.
func rulesOf(np *networkingv1.NetworkPolicy) []string {
	var out []string
	for _, r := range np.Spec.Ingress {
		var from, ports []string
		for _, p := range r.From {
			ns := "-"
			if p.NamespaceSelector != nil {
				ns = fmt.Sprint(p.NamespaceSelector.MatchLabels)
			}
			pods := "-"
			if p.PodSelector != nil {
				pods = fmt.Sprint(p.PodSelector.MatchLabels)
				for _, e := range p.PodSelector.MatchExpressions {
					pods += fmt.Sprint(e.Key, " ", e.Operator, " ", e.Values)
				}
			}
			from = append(from, ns+"/"+pods)
		}
		for _, p := range r.Ports {
			ports = append(ports, fmt.Sprint(*p.Protocol, p.Port.IntValue()))
		}
		out = append(out, "from "+strings.Join(from, " ")+" ports "+strings.Join(ports, ","))
	}
	return out
}

// TestNetworkPolicyModel: the model's pods admit on 8000 only their namespace, the install's
// three components, the gateway's pods and the extra peers; every other port of theirs
// admits no pod.
func TestNetworkPolicyModel(t *testing.T) {
	w := newWorld(1)
	np := typedNP(t, desiredNetworkPolicy(w.isvc, &w.ext, *npOptions()))
	if np.Name != w.isvc.Name || np.Namespace != w.isvc.Namespace || len(np.OwnerReferences) != 1 || np.OwnerReferences[0].UID != w.isvc.UID {
		t.Fatalf("meta %+v", np.ObjectMeta)
	}
	if fmt.Sprint(np.Spec.PodSelector.MatchLabels) != fmt.Sprint(map[string]string{kinds.InstanceLabel: w.isvc.Name}) ||
		fmt.Sprint(np.Spec.PolicyTypes) != "[Ingress]" {
		t.Fatalf("selects %v, types %v", np.Spec.PodSelector, np.Spec.PolicyTypes)
	}
	want := []string{"from -/map[] " +
		"map[kubernetes.io/metadata.name:inferenceservice-system]/map[]app.kubernetes.io/name In [inferenceservice-activator inferenceservice-metrics-adapter inferenceservice-operator] " +
		"map[kubernetes.io/metadata.name:gw]/map[app:envoy] " +
		"map[kubernetes.io/metadata.name:monitoring]/map[] ports TCP8000"}
	if got := rulesOf(np); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rules\n got %q\nwant %q", got, want)
	}
}

// TestNetworkPolicyMultiNode: a group's pods also admit each other on every port (Ray's GCS,
// raylets, object managers and workers, vLLM's NCCL), and only pods of its own LeaderWorkerSet.
func TestNetworkPolicyMultiNode(t *testing.T) {
	w := multiNodeWorld()
	got := rulesOf(typedNP(t, desiredNetworkPolicy(w.isvc, &w.ext, NetworkPolicyOptions{Install: "sys"})))
	if len(got) != 2 || got[1] != "from -/map["+kinds.LWSNameLabel+":"+w.isvc.Name+"] ports " {
		t.Fatalf("rules %q", got)
	}
	if !strings.HasSuffix(got[0], "ports TCP8000") || strings.Contains(got[0], "gw") {
		t.Fatalf("port rule %q", got[0])
	}
}

// TestNetworkPolicyPicker: the picker admits only the gateway, on its three ports; without a
// gateway, no pod (a policy without rules).
func TestNetworkPolicyPicker(t *testing.T) {
	w := newWorld(1)
	np := typedNP(t, desiredPickerNetworkPolicy(w.isvc, *npOptions()))
	if np.Name != PickerName(w.isvc.Name) || np.Spec.PodSelector.MatchLabels[kinds.PickerLabel] != w.isvc.Name {
		t.Fatalf("name %s, selects %v", np.Name, np.Spec.PodSelector)
	}
	if got := rulesOf(np); fmt.Sprint(got) != "[from map[kubernetes.io/metadata.name:gw]/map[app:envoy] ports TCP9002,TCP9003,TCP9090]" {
		t.Fatalf("rules %q", got)
	}
	none := typedNP(t, desiredPickerNetworkPolicy(w.isvc, NetworkPolicyOptions{Install: "sys"}))
	if len(none.Spec.Ingress) != 0 || fmt.Sprint(none.Spec.PolicyTypes) != "[Ingress]" {
		t.Fatalf("without a gateway: %+v", none.Spec)
	}
}

// TestNetworkPolicyNoDrift: what the API server stores is not drift from what the operator
// wants (omitted empty lists, int64 ports, defaulted protocols), so no update loop.
func TestNetworkPolicyNoDrift(t *testing.T) {
	w := multiNodeWorld()
	for _, u := range []*unstructured.Unstructured{
		desiredNetworkPolicy(w.isvc, &w.ext, *npOptions()),
		desiredPickerNetworkPolicy(w.isvc, *npOptions()),
		desiredPickerNetworkPolicy(w.isvc, NetworkPolicyOptions{Install: "sys"}),
	} {
		if unstructuredDrifted(stored(t, u), u) {
			t.Fatalf("%s drifts from itself stored: %v", u.GetName(), u.Object["spec"])
		}
	}
}

// TestNetworkPolicyChildren: with the feature on, a model gets its policy and, with a pool,
// its picker's; converged, nothing more; the feature's options changed, both are updated.
func TestNetworkPolicyChildren(t *testing.T) {
	w := poolWorld()
	w.f.NetworkPolicies, w.f.NetworkPolicy = true, npOptions()
	out := w.reconcile()
	if got := verbs(out.Actions); !strings.Contains(got, "create NetworkPolicy") || !strings.Contains(got, "create PickerNetworkPolicy") {
		t.Fatalf("first reconcile: %s", got)
	}
	w.apply(out.Actions)
	w.obs.NetworkPolicy, w.obs.PickerNetworkPolicy = stored(t, w.obs.NetworkPolicy), stored(t, w.obs.PickerNetworkPolicy)
	if w.obs.PickerNetworkPolicy.GetName() != PickerName(w.isvc.Name) {
		t.Fatalf("picker policy %s", w.obs.PickerNetworkPolicy.GetName())
	}
	for _, a := range w.reconcile().Actions {
		if strings.Contains(a.Kind, "NetworkPolicy") {
			t.Fatalf("converged, still %s %s", a.Verb, a.Kind)
		}
	}
	w.f.NetworkPolicy = &NetworkPolicyOptions{Install: "other"}
	if got := verbs(w.reconcile().Actions); !strings.Contains(got, "update NetworkPolicy") || !strings.Contains(got, "update PickerNetworkPolicy") {
		t.Fatalf("options changed: %s", got)
	}
}

func TestNetworkPolicyOptionsOf(t *testing.T) {
	for _, tc := range []struct {
		gateway, peers, parent, want string
	}{
		{"", "", "gw/public", "{Install:sys Gateway:{Namespace:gw Labels:map[]} Peers:[]}"},
		{"", "", "", "{Install:sys Gateway:{Namespace: Labels:map[]} Peers:[]}"},
		{"none", "", "gw/public", "{Install:sys Gateway:{Namespace: Labels:map[]} Peers:[]}"},
		{"envoy:app=proxy,tier=edge", "mon; prom:app=prometheus", "gw/public",
			"{Install:sys Gateway:{Namespace:envoy Labels:map[app:proxy tier:edge]} Peers:[{Namespace:mon Labels:map[]} {Namespace:prom Labels:map[app:prometheus]}]}"},
		{"envoy:app", "", "", "error"},
		{"", ":a=b", "", "error"},
	} {
		o, err := NetworkPolicyOptionsOf("sys", tc.gateway, tc.peers, tc.parent)
		got := "error"
		if err == nil {
			got = fmt.Sprintf("%+v", *o)
		}
		if got != tc.want {
			t.Errorf("%q %q %q: got %s, want %s", tc.gateway, tc.peers, tc.parent, got, tc.want)
		}
	}
	if _, err := NetworkPolicyOptionsOf("", "", "", ""); err == nil {
		t.Error("an empty install namespace is accepted")
	}
}
