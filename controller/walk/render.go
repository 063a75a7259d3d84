// The two screens: `why` (one isvc's walk) and `list` (every model, one row each).

package walk

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// RenderWhy writes the report as one screen: the operator, each layer with its numbers (the
// first that does not add up marked >>), the causes, that layer's events, the crashed
// container's last state and log, and where to look next.
func RenderWhy(w io.Writer, r Report) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "InferenceService %s/%s (%s)\n", r.Namespace, r.Name, r.ISVC.Model)
	fmt.Fprintf(b, "operator: %s: %s\n", r.Operator.State, r.Operator.Detail)
	if r.Operator.State == "down" {
		// The walk below is live; the isvc's row is what the operator wrote before it stopped.
		fmt.Fprintf(b, "          the isvc's phase and reason are its last write; the layers below are read now\n")
	}
	fmt.Fprintln(b)

	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	marked := r.Marked
	// A LeaderWorkerSet's layers are named for what they are: groups, then StatefulSets.
	alias := map[string]string{}
	if d := r.Deployment; d != nil && d.Kind != "" {
		alias[LayerDeployment], alias[LayerReplicaSet] = d.Kind, "StatefulSet"
	}
	row := func(layer, name, numbers string) {
		mark := "  "
		if layer == marked && layer != "" {
			mark = ">>"
			marked = "" // only the first row of the layer
		}
		label := layer
		if a, ok := alias[layer]; ok {
			label = a
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\n", mark, label, name, numbers)
	}
	fmt.Fprintf(tw, "   LAYER\tNAME\tNUMBERS\n")
	i := r.ISVC
	gen := ""
	if i.ObservedGeneration < i.Generation {
		gen = fmt.Sprintf(", status of generation %d, spec is %d", i.ObservedGeneration, i.Generation)
	}
	row(LayerISVC, r.Name, fmt.Sprintf("desired %d, ready %d, %d GPUs each, %s/%s%s", i.Desired, i.Ready, i.GPUsPerReplica, orDash(i.Phase), orDash(i.Reason), gen))
	if q := i.Queue; q != nil {
		row("Kueue", "LocalQueue "+orDash(q.LocalQueue), fmt.Sprintf("Admitted %s %s: %s", q.Status, q.Reason, q.Message))
	}
	if h := r.HPA; h != nil {
		n := fmt.Sprintf("replicas %d (desired %d, min %d, max %d), %s %s / target %s", h.Current, h.Desired, h.Min, h.Max, h.Metric, orDash(h.Value), orDash(h.Target))
		if h.Limited {
			n += ", at a bound"
		}
		if h.Problem != "" {
			n += ", " + h.Problem
		}
		row(LayerHPA, h.Name, n)
	} else {
		row(LayerHPA, "-", "none")
	}
	if d := r.Deployment; d != nil && d.Kind != "" {
		// Its replicas are groups; a group is ready when every pod of it is.
		row(LayerDeployment, d.Name, fmt.Sprintf("groups desired %d, current %d, up-to-date %d, ready %d", d.Desired, d.Current, d.UpToDate, d.Ready))
	} else if d != nil {
		row(LayerDeployment, d.Name, fmt.Sprintf("desired %d, current %d, up-to-date %d, ready %d, available %d, %s", d.Desired, d.Current, d.UpToDate, d.Ready, d.Available, orDash(d.Progressing)))
	} else {
		row(LayerDeployment, r.Name, "missing")
	}
	for _, rs := range r.ReplicaSets {
		age := "old"
		if rs.New {
			age = "new"
		}
		n := fmt.Sprintf("%s (revision %s): desired %d, current %d, ready %d", age, rs.Revision, rs.Desired, rs.Current, rs.Ready)
		if rs.Desired < 0 { // a LeaderWorkerSet's StatefulSet, seen through its pods
			n = fmt.Sprintf("pods %d, ready %d", rs.Current, rs.Ready)
		}
		if rs.Failure != "" {
			n += ", ReplicaFailure " + rs.Failure
		}
		row(LayerReplicaSet, rs.Name, n)
	}
	if len(r.ReplicaSets) == 0 {
		row(LayerReplicaSet, "-", "none")
	}
	var states []string
	for _, s := range r.Pods.States {
		states = append(states, fmt.Sprintf("%d %s (%s)", s.Count, s.State, s.Pod))
	}
	if len(states) == 0 {
		states = []string{"none"}
	}
	row(LayerPods, fmt.Sprint(r.Pods.Total), strings.Join(states, ", "))
	if rt := r.Route; rt != nil {
		accepted := "not accepted"
		if rt.Accepted {
			accepted = "accepted"
		}
		row(LayerRoute, "HTTPRoute "+rt.Route, fmt.Sprintf("to %s, %s; Routed %s %s", orDash(rt.Backend), accepted, orDash(rt.Status), orDash(rt.Reason)))
		if p := rt.Pool; p != nil {
			picker := fmt.Sprintf("picker %s available %d of %d", p.Picker, p.PickerAvailable, p.PickerDesired)
			if p.PickerMissing {
				picker = "picker " + p.Picker + " missing"
			}
			row(LayerRoute, "InferencePool "+p.Name, fmt.Sprintf("Accepted %s, %s", orDash(p.Accepted), picker))
		}
	}
	if ro := r.Rollout; ro != nil {
		n := fmt.Sprintf("%s, step %d/%d, %d%% to the canary; revision %s -> %s", ro.Phase, ro.Step, ro.Steps, ro.Weight, orDash(ro.StableRevision), orDash(ro.CanaryRevision))
		if ro.Reason != "" {
			n += "; " + ro.Reason
		}
		row(LayerRollout, "canary "+r.Name+"-canary", n)
	}
	tw.Flush()

	if ro := r.Rollout; ro != nil && ro.Message != "" {
		fmt.Fprintf(b, "\nRollout:\n  %s\n", ro.Message)
	}
	if len(r.Causes) > 0 {
		fmt.Fprintf(b, "\nWhy:\n")
		for _, c := range r.Causes {
			fmt.Fprintf(b, "  %s: %s\n", c.Reason, c.Message)
		}
	} else if i.Message != "" {
		fmt.Fprintf(b, "\nWhy:\n  %s: %s\n", i.Reason, i.Message)
	}
	if len(r.Events) > 0 {
		fmt.Fprintf(b, "\nWarning events of the %s layer (first seen, oldest first):\n", r.Marked)
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		for _, e := range r.Events {
			fmt.Fprintf(tw, "  %s\t%s\t%s\tx%d\t%s\t%s\n", e.Age, e.Type, e.Reason, e.Count, e.Object, e.Message)
		}
		tw.Flush()
	}
	if c := r.Crashed; c != nil {
		which := "current, just exited"
		if c.Previous {
			which = "previous"
		}
		fmt.Fprintf(b, "\nCrashed: pod %s container %s, last terminated %s ago: exit code %d (%s), %d restarts\n", c.Pod, c.Container, c.Finished, c.ExitCode, c.Reason, c.Restarts)
		if c.Message != "" {
			fmt.Fprintf(b, "  message: %s\n", c.Message)
		}
		if c.Decisive != "" {
			fmt.Fprintf(b, "  decisive line: %s\n", c.Decisive)
		}
		switch {
		case c.LogError != "":
			fmt.Fprintf(b, "  log (%s run): %s\n", which, c.LogError)
		case len(c.Log) > 0:
			fmt.Fprintf(b, "  log (%s run, last %d lines):\n", which, len(c.Log))
			for _, l := range c.Log {
				fmt.Fprintf(b, "    %s\n", l)
			}
		}
	}
	if l := r.LastStart; l != nil {
		fmt.Fprintf(b, "\nLast start: pod %s, %s from creation to serving (created %s):\n", l.Pod, seconds(l.TotalSeconds), l.Started)
		var parts []string
		for _, p := range l.Phases {
			parts = append(parts, p.Name+" "+seconds(p.Seconds))
		}
		fmt.Fprintf(b, "  %s\n", strings.Join(parts, ", "))
		if l.SlowStart != "" {
			fmt.Fprintf(b, "  %s\n", l.SlowStart)
		}
	}
	switch {
	case r.Next != "":
		fmt.Fprintf(b, "\nLook here next: %s\n", r.next())
	case len(r.Causes) == 0:
		fmt.Fprintf(b, "\nEvery layer adds up: the model serves as asked.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// seconds is a phase's time to the tenth of a second, in minutes past 90 s: "0.4s", "14m05s".
func seconds(s float64) string {
	if s < 90 {
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	}
	d := time.Duration(math.Round(s)) * time.Second
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// next is the runbook line with the isvc's names filled in.
func (r Report) next() string {
	pod := "POD"
	switch {
	case r.Crashed != nil:
		pod = r.Crashed.Pod
	case len(r.Pods.States) > 0:
		for _, s := range r.Pods.States {
			if s.State != "ready" {
				pod = s.Pod
				break
			}
		}
	}
	return strings.NewReplacer("NS", r.Namespace, "NAME", r.Name, "POD", pod).Replace(r.Next)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Row is one model in `list`.
type Row struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	Model         string `json:"model"`
	Phase         string `json:"phase"`
	Reason        string `json:"reason"`
	Replicas      int32  `json:"replicas"`
	Ready         int32  `json:"ready"`
	GPUsRequested int32  `json:"gpusRequested"`
	GPUsReady     int32  `json:"gpusReady"`
	Queue         string `json:"queue,omitempty"`  // the queue per pod (its engine's metric), as the HPA last read it
	Target        string `json:"target,omitempty"` // the HPA's target for it
	// The wide columns: GPUs per replica, the HPA read (empty if none), and the generation the
	// status was written for against the spec's, to tell a status that lags the spec.
	GPUsPerReplica     int32  `json:"gpusPerReplica"`
	HPA                string `json:"hpa,omitempty"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
}

// RenderList writes the models as a table, kubectl get's way.
func RenderList(w io.Writer, rows []Row, allNamespaces bool) error {
	return renderList(w, rows, allNamespaces, false)
}

// RenderListWide is RenderList with the wide columns after the others, as `-o wide` adds them.
func RenderListWide(w io.Writer, rows []Row, allNamespaces bool) error {
	return renderList(w, rows, allNamespaces, true)
}

func renderList(w io.Writer, rows []Row, allNamespaces, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if allNamespaces {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprint(tw, "NAME\tMODEL\tPHASE\tREASON\tREADY\tGPUS READY/REQ\tQUEUE/TARGET")
	if wide {
		fmt.Fprint(tw, "\tGPUS/REPLICA\tHPA\tOBSERVED/GENERATION")
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		if allNamespaces {
			fmt.Fprintf(tw, "%s\t", r.Namespace)
		}
		q := "-"
		if r.Target != "" {
			q = orDash(r.Queue) + "/" + r.Target
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d/%d\t%s", r.Name, r.Model, orDash(r.Phase), orDash(r.Reason), r.Ready, r.Replicas, r.GPUsReady, r.GPUsRequested, q)
		if wide {
			fmt.Fprintf(tw, "\t%d\t%s\t%d/%d", r.GPUsPerReplica, orDash(r.HPA), r.ObservedGeneration, r.Generation)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
