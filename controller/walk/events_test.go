package walk

import "testing"

// TestEventsGrouped: one row per object and reason with the counts summed, the latest
// message without the recorder's "combined" prefix, Normal events and other layers' left out.
func TestEventsGrouped(t *testing.T) {
	r := Build(quota(model(3, 2)))
	want := Event{Age: "5s", Type: "Warning", Reason: "FailedCreate", Object: "replicaset/qwen3-7b6cd",
		Message: `Error creating: pods "qwen3-7b6cd-b" is forbidden: exceeded quota: team-a`, Count: 12}
	if len(r.Events) != 1 || r.Events[0] != want {
		t.Fatalf("events %+v, want [%+v]", r.Events, want)
	}
}
