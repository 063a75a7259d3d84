package reconcile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

func evictedPod(name string, ago time.Duration) *corev1.Pod {
	return pod(name, func(p *corev1.Pod) {
		p.Spec.NodeName = "fake-node-1"
		p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", QOSClass: corev1.PodQOSBurstable,
			Message:    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. Container vllm was using 3Gi, request is 10Gi, has larger consumption of memory. ",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-ago))}}}
	})
}

// One eviction is the ReplicaSet's to replace; the third within the hour is a cause, named with
// the node, its pressure and the QoS advice, while the replacements serve (Ready stays True);
// it ends by itself when the oldest leaves the window.
func TestFrequentEviction(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			for _, n := range []int{1, 2, 3} {
				w, _ := diagnosisWorld(t, 2, 2)
				for i := range n {
					p := evictedPod(fmt.Sprintf("qwen3-7b6cd-e%d", i), time.Duration(10*(i+1))*time.Minute)
					if cached {
						sp, _ := kinds.StripPod(p.DeepCopy())
						p = sp.(*corev1.Pod)
					}
					w.obs.Pods = append(w.obs.Pods, p)
				}
				in := Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}
				st := Reconcile(in).Status
				prog := findCond(st.Conditions, crd.ConditionProgressing)
				if n < FrequentEvictions {
					if st.Phase != crd.PhaseReady {
						t.Fatalf("%d evictions: %s/%s: %s", n, st.Phase, st.Reason, prog.Message)
					}
					continue
				}
				ready := findCond(st.Conditions, crd.ConditionReady)
				if st.Reason != ReasonFrequentEviction || st.Phase != crd.PhaseProgressing || ready.Status != metav1.ConditionTrue || prog.Status != metav1.ConditionFalse {
					t.Fatalf("%d evictions: %s/%s ready %s: %s", n, st.Phase, st.Reason, ready.Status, prog.Message)
				}
				for _, want := range []string{"3 pods of the current revision evicted", "Pod qwen3-7b6cd-e0 on node fake-node-1 (MemoryPressure)", "QoS Burstable"} {
					if !strings.Contains(prog.Message, want) {
						t.Fatalf("message lacks %q: %s", want, prog.Message)
					}
				}
				// The oldest was evicted 30 minutes ago: the count falls below 3 in 30 minutes.
				if got := diagnosisRecheck(in); got != 30*time.Minute {
					t.Fatalf("recheck in %s, want 30m", got)
				}
				in.Now = metav1.NewTime(t0.Add(31 * time.Minute))
				if st := Reconcile(in).Status; st.Phase != crd.PhaseReady {
					t.Fatalf("an hour after: %s/%s", st.Phase, st.Reason)
				}
			}
		})
	}
}
