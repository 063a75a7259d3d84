// The placement layer of the scheduling diagnosis: the scheduler's message counts the nodes an
// untolerated taint or an unmatched node selector kept the pod off ("node(s) had untolerated
// taint(s)", "node(s) didn't match Pod's node affinity/selector", kube-scheduler v1.37's
// TaintToleration and NodeAffinity plugins) but names neither the taint nor the label. Read
// against the nodes (NodePlacement, from the evidence layer's node list), the finding names
// them and the isvc field that lets the pods on: spec.tolerations, spec.nodeSelector.

package reconcile

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/informers/kinds"
)

// NodePlacement is a node as the placement diagnosis reads it: its labels and its taints that
// keep pods off (NoSchedule, NoExecute).
type NodePlacement struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
}

// WantsPlacementSurvey reports whether the model has a pod the scheduler keeps off nodes for a
// taint or a selector: the only case the nodes' taints and labels are read for.
func WantsPlacementSurvey(in Input) bool {
	for _, p := range in.Observed.Pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				for _, f := range schedulerFilters {
					if strings.Contains(c.Message, f.phrase) {
						return true
					}
				}
			}
		}
	}
	return false
}

// tolerates is the scheduler's toleration match (Toleration.ToleratesTaint) for Equal and
// Exists; a comparison operator (Lt, Gt) on the taint's key is taken as tolerating, so a
// taint is never named that the pod may in fact tolerate.
func tolerates(ts []corev1.Toleration, taint corev1.Taint) bool {
	return slices.ContainsFunc(ts, func(t corev1.Toleration) bool {
		if t.Effect != "" && t.Effect != taint.Effect {
			return false
		}
		if t.Key == "" {
			return t.Operator == corev1.TolerationOpExists
		}
		if t.Key != taint.Key {
			return false
		}
		switch t.Operator {
		case corev1.TolerationOpExists, corev1.TolerationOpLt, corev1.TolerationOpGt:
			return true
		}
		return t.Value == taint.Value
	})
}

// taintString is a taint as kubectl taint writes it: key=value:effect, key:effect without a value.
func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// untoleratedTaints names the taints the pod does not tolerate, by how many nodes carry them
// (at most three), and the toleration to add to spec.tolerations for the most common one. Only
// the nodes the pod's selector and affinity match are read when some do: a model selecting its
// GPU pool is told that pool's taint, not the system nodes'.
func untoleratedTaints(p *corev1.Pod, nodes []NodePlacement) string {
	if matching := slices.DeleteFunc(slices.Clone(nodes), func(n NodePlacement) bool { return !nodeMatches(p, n) }); len(matching) > 0 {
		nodes = matching
	}
	count := map[string]int{}
	byName := map[string]corev1.Taint{}
	for _, n := range nodes {
		for _, t := range n.Taints {
			if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerates(p.Spec.Tolerations, t) {
				s := taintString(t)
				count[s]++
				byName[s] = t
			}
		}
	}
	if len(count) == 0 {
		return ""
	}
	names := make([]string, 0, len(count))
	for s := range count {
		names = append(names, s)
	}
	sort.Slice(names, func(i, j int) bool {
		if count[names[i]] != count[names[j]] {
			return count[names[i]] > count[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, 3)
	for _, s := range names[:min(3, len(names))] {
		parts = append(parts, fmt.Sprintf("%s (%d node(s))", s, count[s]))
	}
	top := byName[names[0]]
	if kinds.HealthTaint(top) {
		// A GPU health check's taint marks nodes to heal: tolerating it would run on a sick GPU.
		return fmt.Sprintf(" [untolerated taint(s) %s: a GPU health check's taint; heal or replace the nodes, do not tolerate it]", strings.Join(parts, ", "))
	}
	tol := fmt.Sprintf("{key: %s, operator: Equal, value: %q, effect: %s}", top.Key, top.Value, top.Effect)
	if top.Value == "" {
		tol = fmt.Sprintf("{key: %s, operator: Exists, effect: %s}", top.Key, top.Effect)
	}
	return fmt.Sprintf(" [untolerated taint(s) %s: to run there, add to the InferenceService's spec.tolerations %s]", strings.Join(parts, ", "), tol)
}

// unmatchedSelector names the node selector labels no node carries, or says the selector or
// the affinity's required node terms match no node as a whole; "" when some node matches.
func unmatchedSelector(p *corev1.Pod, nodes []NodePlacement) string {
	if slices.ContainsFunc(nodes, func(n NodePlacement) bool { return nodeMatches(p, n) }) {
		return ""
	}
	var missing []string
	keys := make([]string, 0, len(p.Spec.NodeSelector))
	for k := range p.Spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := p.Spec.NodeSelector[k]
		if !slices.ContainsFunc(nodes, func(n NodePlacement) bool { return n.Labels[k] == v && hasKey(n.Labels, k) }) {
			missing = append(missing, k+"="+v)
		}
	}
	const fix = ": set the InferenceService's spec.nodeSelector (or spec.affinity) to labels your GPU nodes carry (kubectl get nodes --show-labels)"
	switch {
	case len(missing) > 0:
		return fmt.Sprintf(" [no node has the label %s of the pods' node selector%s]", strings.Join(missing, ", "), fix)
	case len(p.Spec.NodeSelector) > 0 && !slices.ContainsFunc(nodes, func(n NodePlacement) bool { return selectorMatches(p.Spec.NodeSelector, n.Labels) }):
		return fmt.Sprintf(" [no node has all the labels of the pods' node selector %s%s]", selectorText(p.Spec.NodeSelector), fix)
	}
	return " [no node matches the pods' required node affinity" + fix + "]"
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func selectorText(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func selectorMatches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// nodeMatches is the NodeAffinity filter's match of the pod's node selector and required node
// affinity terms (ORed, their expressions ANDed); a term with Gt, Lt or matchFields is taken as
// matching, so a node is never called unmatched that may match.
func nodeMatches(p *corev1.Pod, n NodePlacement) bool {
	if !selectorMatches(p.Spec.NodeSelector, n.Labels) {
		return false
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	return slices.ContainsFunc(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, func(t corev1.NodeSelectorTerm) bool {
		if len(t.MatchFields) > 0 {
			return true
		}
		for _, r := range t.MatchExpressions {
			v, ok := n.Labels[r.Key]
			switch r.Operator {
			case corev1.NodeSelectorOpIn:
				if !ok || !slices.Contains(r.Values, v) {
					return false
				}
			case corev1.NodeSelectorOpNotIn:
				if ok && slices.Contains(r.Values, v) {
					return false
				}
			case corev1.NodeSelectorOpExists:
				if !ok {
					return false
				}
			case corev1.NodeSelectorOpDoesNotExist:
				if ok {
					return false
				}
			}
		}
		return len(t.MatchExpressions) > 0
	})
}
