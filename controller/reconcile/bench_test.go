package reconcile

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkReconcileResync is what every resync of every converged isvc costs: the
// controller keeps no desired children between reconciles (memory), so each builds them.
func BenchmarkReconcileResync(b *testing.B) {
	w := newWorld(3)
	w.apply(w.reconcile().Actions)
	w.podsReady()
	w.reconcile()
	in := Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := Reconcile(in); len(out.Actions) != 0 {
			b.Fatal("not converged")
		}
	}
}

// BenchmarkReconcileCreate is the cost of deciding a new isvc's three children.
func BenchmarkReconcileCreate(b *testing.B) {
	w := newWorld(3)
	in := Input{ISVC: w.isvc, Now: metav1.NewTime(t0)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := Reconcile(in); len(out.Actions) != 3 {
			b.Fatal("want 3 creates")
		}
	}
}
