package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// Cause is one reason the model is not serving, ranked: lower Rank blocks more.
type Cause struct {
	Rank    int
	Reason  string
	Message string
}

// NewWarning returns the Warning Event that next deserves over stored: one when a new blocking
// reason appears, whether the model is down (Ready False) or serves while its rollout is
// blocked (Ready True, Progressing carrying the cause). A message that only changes (a restart
// count growing) is not a new cause.
func NewWarning(stored, next *crd.InferenceServiceStatus) (reason, message string, ok bool) {
	if !IsWarning(next.Reason) || stored.Reason == next.Reason {
		return "", "", false
	}
	c := meta.FindStatusCondition(next.Conditions, crd.ConditionReady)
	if c == nil || c.Reason != next.Reason {
		c = meta.FindStatusCondition(next.Conditions, crd.ConditionProgressing)
	}
	if c == nil || c.Reason != next.Reason {
		return "", "", false
	}
	return next.Reason, c.Message, true
}

// ObservedStatus is the observed part of the status, before conditions are decided.
func ObservedStatus(in Input) crd.InferenceServiceStatus {
	return observedStatus(in, selectorString(in.ISVC.Name))
}

func observedStatus(in Input, selector string) crd.InferenceServiceStatus {
	isvc := in.ISVC
	st := crd.InferenceServiceStatus{
		ObservedGeneration: isvc.Generation,
		Selector:           selector,
		Conditions:         append([]metav1.Condition(nil), isvc.Status.Conditions...),
	}
	if d, _, ok := runningView(&in); ok {
		st.Replicas, st.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
	}
	return st
}

// causesOf lists why the model is not (yet) serving, unsorted.
func causesOf(in Input, actions []Action, conflicts []string) []Cause {
	var causes []Cause
	for _, c := range conflicts {
		causes = append(causes, Cause{RankConflict, ReasonChildConflict, c})
	}
	if len(actions) > 0 {
		causes = append(causes, Cause{RankActing, ReasonReconciling, describeActions(actions)})
	}
	if d, rss, ok := runningView(&in); ok && len(actions) == 0 {
		causes = append(causes, rolloutCauses(in.ISVC, d, rss, in.Observed.Pods, evidenceOf(in), in.Now.Time)...)
	}
	return causes
}

// WithCauses sets Ready, Progressing, phase and reason on st from the causes, most blocking
// first (no cause means Ready), and records a new diagnosis in the history.
func WithCauses(st crd.InferenceServiceStatus, isvc *crd.InferenceService, causes []Cause, now metav1.Time) crd.InferenceServiceStatus {
	st = withCauses(st, isvc, causes, now)
	st.History = recordDiagnosis(isvc.Status.History, &st, now)
	return st
}

func withCauses(st crd.InferenceServiceStatus, isvc *crd.InferenceService, causes []Cause, now metav1.Time) crd.InferenceServiceStatus {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: isvc.Generation, LastTransitionTime: now,
		})
	}
	if len(causes) == 0 {
		reason, msg := ReasonAvailable, fmt.Sprintf("%d/%d replicas ready", st.ReadyReplicas, isvc.Spec.Replicas)
		if isvc.Spec.Replicas == 0 {
			reason, msg = ReasonScaledToZero, "spec.replicas is 0: no pods run"
		}
		set(crd.ConditionReady, metav1.ConditionTrue, reason, msg)
		set(crd.ConditionProgressing, metav1.ConditionFalse, ReasonConverged, "every child matches the spec")
		st.Phase, st.Reason = crd.PhaseReady, ""
		return st
	}
	causes = sortCauses(causes)
	top := causes[0]
	msgs := make([]string, len(causes))
	for i, c := range causes {
		msgs[i] = c.Message
	}
	if top.Rank >= RankServing {
		// spec.replicas pods serve: Ready says so, and the rollout's causes are Progressing's
		// (False when someone must act), the phase Progressing and the reason column theirs.
		set(crd.ConditionReady, metav1.ConditionTrue, ReasonAvailable, fmt.Sprintf("%d/%d replicas ready", st.ReadyReplicas, isvc.Spec.Replicas))
		progressing := metav1.ConditionTrue
		if failing[top.Reason] {
			progressing = metav1.ConditionFalse
		}
		set(crd.ConditionProgressing, progressing, top.Reason, strings.Join(msgs, "; "))
		st.Phase, st.Reason = crd.PhaseProgressing, top.Reason
		return st
	}
	set(crd.ConditionReady, metav1.ConditionFalse, top.Reason, strings.Join(msgs, "; "))
	st.Reason = top.Reason
	switch {
	case failing[top.Reason]:
		set(crd.ConditionProgressing, metav1.ConditionFalse, top.Reason, top.Message)
		st.Phase = crd.PhaseFailed
	case top.Reason == ReasonNamespaceTerminating: // it goes with its namespace
		set(crd.ConditionProgressing, metav1.ConditionFalse, top.Reason, top.Message)
		st.Phase = crd.PhaseTerminating
	default:
		set(crd.ConditionProgressing, metav1.ConditionTrue, top.Reason, top.Message)
		st.Phase = crd.PhaseProgressing
	}
	return st
}

// sortCauses returns the causes ordered by rank, stable so equal ranks keep discovery order;
// it copies so a caller's slice is never reordered.
func sortCauses(cs []Cause) []Cause {
	cs = slices.Clone(cs)
	slices.SortStableFunc(cs, func(a, b Cause) int { return a.Rank - b.Rank })
	return cs
}

func describeActions(actions []Action) string {
	var b strings.Builder
	for i, a := range actions {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(a.Verb))
		b.WriteByte(' ')
		b.WriteString(a.Kind)
		b.WriteByte(' ')
		b.WriteString(a.Object.GetName())
	}
	return b.String()
}

// statusEqual decides whether a status write is needed; Semantic compares times and
// quantities by value.
func statusEqual(a, b *crd.InferenceServiceStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// ExtensionsEqual decides whether v1beta1's status additions need a write.
func ExtensionsEqual(a, b *crd.StatusExtensions) bool {
	return a.Endpoint == b.Endpoint && a.ModelName == b.ModelName && a.RoutePath == b.RoutePath &&
		slices.Equal(a.LoadedAdapters, b.LoadedAdapters) && ptr.Equal(a.LastColdStart, b.LastColdStart) &&
		ptr.Equal(a.Cache, b.Cache) && equality.Semantic.DeepEqual(a.LastStart, b.LastStart) && ptr.Equal(a.Rollout, b.Rollout)
}

// WorthWriting reports whether next differs from stored in something a user acts on.
// While a start or rollout progresses on its own, only its counts and reason are written: its
// message moves with every pod and would cost a write each. Failing reasons always are.
// AutoscalingActive's queue reading is written only when it moves enough (queueMoved), and
// while a start progresses its Unknown reason is not worth a write of its own.
func WorthWriting(stored, next *crd.InferenceServiceStatus) bool {
	if statusEqual(stored, next) || sameButQueue(stored, next) {
		return false
	}
	// status.replicas (pods that exist) is left to catch up with the next write while a start
	// progresses: readyReplicas, the reason and the phase are what users and alerts read.
	if stored.ObservedGeneration != next.ObservedGeneration || (stored.Replicas != next.Replicas && next.Phase != crd.PhaseProgressing) ||
		stored.ReadyReplicas != next.ReadyReplicas || stored.Phase != next.Phase || stored.Reason != next.Reason ||
		stored.Selector != next.Selector || len(stored.Conditions) != len(next.Conditions) || next.Phase != crd.PhaseProgressing {
		return true
	}
	for i := range next.Conditions {
		n := &next.Conditions[i]
		o := meta.FindStatusCondition(stored.Conditions, n.Type)
		if n.Type == crd.ConditionAutoscalingActive && o != nil && o.Status == metav1.ConditionUnknown && n.Status == metav1.ConditionUnknown &&
			o.ObservedGeneration == n.ObservedGeneration {
			// Why the HPA has not said yet (not reported, no ready pod) claims nothing either way:
			// the start's next write carries it.
			continue
		}
		if o == nil || o.Status != n.Status || o.Reason != n.Reason || o.ObservedGeneration != n.ObservedGeneration {
			return true
		}
		if n.Type == crd.ConditionAutoscalingActive {
			if o.Message != n.Message && queueMoved(o.Message, n.Message) {
				return true
			}
			continue
		}
		// A queued model's message is the queue's account (Kueue's words on its Workloads): it
		// changes at the queue's pace, and is what a user waiting reads.
		if o.Message != n.Message && (n.Type != crd.ConditionReady && n.Type != crd.ConditionProgressing || IsFailing(n.Reason) || n.Reason == ReasonWaitingForAdmission || n.Reason == ReasonWeightsDownloading) {
			return true
		}
	}
	return false
}

// Transient reports a status the model's own progress will replace without anyone acting. The
// status reason is the top cause's, also while Ready stays True during a blocked rollout.
func Transient(st *crd.InferenceServiceStatus) bool {
	return st.Phase == crd.PhaseProgressing && st.Reason != "" && !IsWarning(st.Reason)
}

// SurgeOnly reports a Progressing status that differs from the stored one only in counts at or
// above what the spec asks (a rolling update's surge pod), or in messages: nobody acts on it.
func SurgeOnly(stored, next *crd.InferenceServiceStatus, want int32) bool {
	if stored.Phase != crd.PhaseProgressing || stored.ReadyReplicas < want || next.ReadyReplicas < want {
		return false
	}
	s := *next
	s.ReadyReplicas, s.Replicas = stored.ReadyReplicas, stored.Replicas
	return !WorthWriting(stored, &s)
}

// AutoscalingOnly reports a status that differs from the stored one only in its
// AutoscalingActive condition: the HPA's verdict, with nothing else new about the model.
func AutoscalingOnly(stored, next *crd.InferenceServiceStatus) bool {
	if !WorthWriting(stored, next) {
		return false
	}
	s := *next
	s.Conditions = append([]metav1.Condition(nil), next.Conditions...)
	meta.RemoveStatusCondition(&s.Conditions, crd.ConditionAutoscalingActive)
	if c := meta.FindStatusCondition(stored.Conditions, crd.ConditionAutoscalingActive); c != nil {
		s.Conditions = append(s.Conditions, *c)
	}
	return !WorthWriting(stored, &s)
}

// recordDiagnosis returns history with st's diagnosis appended when it is one worth keeping
// and differs from the last kept: a failure, a wait for admission, or the recovery after one
// of them. Starts, rollouts and the operator's own work pass without a record, and a message
// that only changes is the same diagnosis, so a model at rest never adds one.
func recordDiagnosis(history []crd.DiagnosisRecord, st *crd.InferenceServiceStatus, now metav1.Time) []crd.DiagnosisRecord {
	reason, cond := st.Reason, crd.ConditionReady
	switch {
	case st.Phase == crd.PhaseReady:
		reason = ReasonAvailable
		if len(history) == 0 {
			return history // a model that never failed has nothing to recover from
		}
	case st.Phase == crd.PhaseProgressing && IsFailing(reason):
		cond = crd.ConditionProgressing // serving while its rollout is blocked: the cause is Progressing's
	case !IsFailing(reason) && reason != ReasonWaitingForAdmission:
		return history
	}
	if n := len(history); n > 0 && history[n-1].Phase == st.Phase && history[n-1].Reason == reason {
		return history
	}
	msg := ""
	if c := meta.FindStatusCondition(st.Conditions, cond); c != nil {
		msg = c.Message
	}
	if len(msg) > crd.MaxHistoryMessage {
		msg = msg[:crd.MaxHistoryMessage-3] + "..."
	}
	out := append(slices.Clone(history), crd.DiagnosisRecord{Time: now, Phase: st.Phase, Reason: reason, Message: msg})
	if len(out) > crd.MaxHistory {
		out = out[len(out)-crd.MaxHistory:]
	}
	return out
}
