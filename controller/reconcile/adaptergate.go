// The adapters readiness gate: a pod of a model with adapters declares it, so the kubelet
// counts the pod Ready (and the Service sends it traffic) only once the operator has seen its
// server list every adapter. Without it a new or restarted pod serves before its adapters are
// loaded, and a request for one gets vLLM's 404 "The model ... does not exist".

package reconcile

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// Reasons of the gate's condition on a pod.
const (
	GateAdaptersLoaded  = "AdaptersLoaded"
	GateAdaptersLoading = "AdaptersLoading"
	GateServerNotReady  = "ServerNotReady"
)

// PodGate is the adapters gate's condition a pod's status is to carry.
type PodGate struct {
	Namespace, Pod string
	Status         corev1.ConditionStatus
	Reason         string
}

// ServerReady reports whether the pod's model server answers its readiness probe: for a pod
// with the adapters gate its ContainersReady condition, whatever the gate says (the cache keeps
// it only for those); for others Ready.
func ServerReady(p *corev1.Pod) bool {
	want := corev1.PodReady
	if kinds.HasAdaptersGate(&p.Spec) {
		want = corev1.ContainersReady
	}
	for _, c := range p.Status.Conditions {
		if c.Type == want {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func gateStatus(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == kinds.AdaptersGate {
			return c.Status
		}
	}
	return ""
}

// adapterGates decides the gate of each pod that declares it, where it changes: True once the
// pod's server lists every adapter it can load (one it refused counts as settled: the base model
// serving is worth more than an adapter, and the refusal is the AdaptersReady condition's), False
// while it lacks one, and False as soon as its server is not ready (a restarted container has
// lost what was loaded into it). A pod not observed this time keeps its gate.
func adapterGates(want []crd.Adapter, observed []PodAdapters, pods []*corev1.Pod) []PodGate {
	loadable := make(map[string]string, len(want))
	for _, a := range want {
		if path, err := AdapterPath(a.StorageURI); err == nil {
			loadable[a.Name] = path
		}
	}
	byPod := make(map[string]*PodAdapters, len(observed))
	for i := range observed {
		if observed[i].Err == "" {
			byPod[observed[i].Pod] = &observed[i]
		}
	}
	var out []PodGate
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !kinds.HasAdaptersGate(&p.Spec) {
			continue
		}
		cur := gateStatus(p)
		next, reason := cur, ""
		switch o := byPod[p.Name]; {
		case !ServerReady(p):
			if cur == corev1.ConditionTrue {
				next, reason = corev1.ConditionFalse, GateServerNotReady
			}
		case len(loadable) == 0:
			next, reason = corev1.ConditionTrue, GateAdaptersLoaded
		case o != nil:
			next, reason = corev1.ConditionTrue, GateAdaptersLoaded
			have := make(map[string]string, len(o.Loaded))
			for _, l := range o.Loaded {
				have[l.Name] = l.Path
			}
			for name, path := range loadable {
				if have[name] != path && o.Failed[name] == "" {
					next, reason = corev1.ConditionFalse, GateAdaptersLoading
					break
				}
			}
		}
		if next != cur {
			out = append(out, PodGate{Namespace: p.Namespace, Pod: p.Name, Status: next, Reason: reason})
		}
	}
	return out
}
