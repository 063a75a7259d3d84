// The operator's Event recorder (controller/recorder) against the real events.k8s.io/v1 API:
// what the API server accepts of its creates and series patches, read back with kubectl.

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/recorder"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRecorderSeriesOnTheAPIServer(t *testing.T) {
	ns := namespace(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "regarding"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A fake clock for the series' timers (6 minutes quiet); the API server's time is its own.
	clock := clocktesting.NewFakeClock(time.Now())
	dropped := make(chan string, 10)
	rec := recorder.New(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, recorder.Options{Scheme: scheme.Scheme,
		Controller: "inferenceservice-operator", Clock: clock, Dropped: func(r string) { dropped <- r }})
	go rec.Run(ctx)

	read := func() []eventsv1.Event {
		var l eventsv1.EventList
		if err := json.Unmarshal([]byte(kubectl(t, "get", "events.v1.events.k8s.io", "-n", ns, "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	seriesOf := func(want int32) func() (bool, string) {
		return func() (bool, string) {
			items := read()
			var got []string
			for _, e := range items {
				n := int32(1)
				if e.Series != nil {
					n = e.Series.Count
				}
				got = append(got, fmt.Sprintf("%s %s x%d", e.Name, e.Reason, n))
			}
			return len(items) == 1 && items[0].Series != nil && items[0].Series.Count == want,
				fmt.Sprintf("Events %v, want one with a series of %d (dropped %d)", got, want, len(dropped))
		}
	}

	rec.Eventf(cm, nil, corev1.EventTypeWarning, "Failed", "Create", "quota %s exceeded", "team-a")
	eventually(t, 30*time.Second, func() (bool, string) { n := len(read()); return n == 1, fmt.Sprintf("%d Events, want 1", n) })
	first := read()[0]
	if first.Note != "quota team-a exceeded" || first.Regarding.UID != cm.UID || first.ReportingController != "inferenceservice-operator" {
		t.Fatalf("first Event %+v", first)
	}

	clock.Step(time.Second)
	rec.Eventf(cm, nil, corev1.EventTypeWarning, "Failed", "Create", "quota %s exceeded", "team-a")
	eventually(t, 30*time.Second, seriesOf(2)) // the API server took the series patch on the first
	for range 3 {
		clock.Step(time.Second)
		rec.Eventf(cm, nil, corev1.EventTypeWarning, "Failed", "Create", "quota %s exceeded", "team-a")
	}
	clock.Step(6 * time.Minute)
	eventually(t, 30*time.Second, seriesOf(5)) // the final count, once quiet for 6 minutes

	// A series whose Event is gone (deleted, or its hour's TTL passed) is created whole.
	if err := cs.EventsV1().Events(ns).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Second)
	rec.Eventf(cm, nil, corev1.EventTypeWarning, "Scaled", "Scale", "one")
	// Written before it is deleted (a patch that overtakes its create waits the 10 s retry, on
	// this fake clock for ever).
	eventually(t, 30*time.Second, func() (bool, string) { n := len(read()); return n == 1, fmt.Sprintf("%d Events, want 1", n) })
	if err := cs.EventsV1().Events(ns).Delete(ctx, read()[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Second)
	rec.Eventf(cm, nil, corev1.EventTypeWarning, "Scaled", "Scale", "two")
	eventually(t, 30*time.Second, seriesOf(2))
	if e := read()[0]; e.Reason != "Scaled" || e.Note != "two" {
		t.Fatalf("Event %s %q, want the Scaled series with the latest note", e.Reason, e.Note)
	}
	if len(dropped) != 0 {
		t.Fatalf("%d Events dropped, want none: %s", len(dropped), <-dropped)
	}
}
