// The marked layer's events: Warning Events grouped by object and reason, oldest first.

package walk

import (
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
)

// events are the Warning Events of the marked layer's objects (the isvc's for the isvc layer),
// one per object and reason with their counts summed and the latest message, in the order they
// first happened, the last maxEvents of them. Normal events (Scheduled, Pulled, Started) say
// nothing the layer's numbers do not.
func events(all []corev1.Event, layer string, o Objects, rss []*appsv1.ReplicaSet, pods []*corev1.Pod) []Event {
	kind, names := "", map[string]bool{}
	switch layer {
	case "":
		return nil
	case LayerISVC:
		kind, names[o.ISVC.Name] = crd.Kind, true
	case LayerHPA:
		kind, names[o.HPA.Name] = "HorizontalPodAutoscaler", true
	case LayerDeployment:
		kind, names[o.ISVC.Name] = "Deployment", true
		if o.LeaderWorkerSet != nil {
			kind = reconcile.KindLeaderWorkerSet
		}
	case LayerReplicaSet:
		kind = "ReplicaSet"
		if o.LeaderWorkerSet != nil {
			kind = "StatefulSet"
		}
		for _, rs := range rss {
			names[rs.Name] = true
		}
	case LayerPods:
		kind = "Pod"
		for _, p := range pods {
			names[p.Name] = true
		}
	}
	type group struct {
		first, last time.Time
		e           corev1.Event
		count       int32
	}
	groups := map[string]*group{}
	for _, e := range all {
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != kind || !names[e.InvolvedObject.Name] {
			continue
		}
		k := e.InvolvedObject.Name + "/" + e.Reason
		first := e.FirstTimestamp.Time
		if first.IsZero() {
			first = lastSeen(e)
		}
		g := groups[k]
		if g == nil {
			g = &group{first: first}
			groups[k] = g
		}
		if first.Before(g.first) {
			g.first = first
		}
		if l := lastSeen(e); !l.Before(g.last) {
			g.last, g.e = l, e
		}
		g.count += max(e.Count, 1)
		if e.Series != nil {
			g.count += e.Series.Count - 1
		}
	}
	sorted := make([]*group, 0, len(groups))
	for _, g := range groups {
		sorted = append(sorted, g)
	}
	sort.Slice(sorted, func(a, b int) bool {
		if !sorted[a].first.Equal(sorted[b].first) {
			return sorted[a].first.Before(sorted[b].first)
		}
		return sorted[a].e.Reason < sorted[b].e.Reason
	})
	if len(sorted) > maxEvents {
		sorted = sorted[len(sorted)-maxEvents:]
	}
	var evs []Event
	for _, g := range sorted {
		e := g.e
		evs = append(evs, Event{Age: age(o.Now, g.last), Type: e.Type, Reason: e.Reason,
			Object: strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name, Message: strings.TrimPrefix(firstLine(e.Message), combined), Count: g.count})
	}
	return evs
}

// combined is how the event recorder prefixes an event that stands for several similar ones:
// the count already says so.
const combined = "(combined from similar events): "

// maxEvents keeps the screen to one: the most recent say what is happening now.
const maxEvents = 6

// lastSeen is when an Event last happened, whichever API wrote it.
func lastSeen(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
