package evidence

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func stsEvent(name, sts, reason, msg string, last time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Name: sts, Namespace: "default"},
		Reason:         reason, Message: msg, Type: corev1.EventTypeWarning, LastTimestamp: metav1.NewTime(last)}
}

// The model's StatefulSets' latest fresh FailedCreate each, from one list asking the server
// for FailedCreate Events of StatefulSets: another model's, a stale one and other reasons
// are left out.
func TestReadGroupFailures(t *testing.T) {
	now := t0
	kube := kubefake.NewClientset(
		stsEvent("a", "big", "FailedCreate", "old refusal", now.Add(-2*time.Minute)),
		stsEvent("b", "big", "FailedCreate", "exceeded quota: gpus", now.Add(-10*time.Second)),
		stsEvent("c", "big-1", "FailedCreate", "exceeded quota: gpus (worker)", now.Add(-time.Minute)),
		stsEvent("d", "big-2", "FailedCreate", "an hour ago", now.Add(-time.Hour)),
		stsEvent("e", "bigger", "FailedCreate", "another model's", now),
		stsEvent("f", "big-0", "SuccessfulCreate", "created", now),
	)
	var selector string
	kube.PrependReactor("list", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
		selector = a.(clienttesting.ListAction).GetListRestrictions().Fields.String()
		return false, nil, nil
	})
	r := New(Config{Kube: kube})
	got := r.readGroupFailures(context.Background(), "default", "big", now)
	want := map[string]string{"big": "exceeded quota: gpus", "big-1": "exceeded quota: gpus (worker)"}
	if len(got) != len(want) || got["big"] != want["big"] || got["big-1"] != want["big-1"] {
		t.Fatalf("got %v, want %v", got, want)
	}
	if selector != "involvedObject.kind=StatefulSet,reason=FailedCreate" {
		t.Fatalf("field selector %q", selector)
	}
}
