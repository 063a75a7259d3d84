package soak

import (
	"testing"
	"time"
)

// Each failure is charged to the fault whose window holds it, by error class; the rest to none.
func TestLostByFault(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ws := []faultWindow{{"node-lost", at(10), at(20)}, {"apiserver-restart", at(30), at(40)}}
	fs := []failure{
		{at(12), `Post "http://127.0.1.5:8000/v1/completions": dial tcp 127.0.1.5:8000: connect: connection refused`, 1},
		{at(15), `Post "http://127.0.1.5:8000/v1/completions": EOF`, 0},
		{at(20), `Post "http://127.0.1.5:8000/v1/completions": dial tcp 127.0.1.5:8000: connect: connection refused`, 2},
		{at(25), `503 Service Unavailable: {"error":"draining"}`, 0},
		{at(31), `Post "http://127.0.1.6:8000/v1/completions": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, 0},
	}
	want := "  node-lost              3      2 with another pod ready  (cut 1, refused 2)\n" +
		"  (no fault)             1      0 with another pod ready  (HTTP 503 1)\n" +
		"  apiserver-restart      1      0 with another pod ready  (timeout 1)\n"
	if got := lostByFault(fs, ws); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := lostByFault(nil, ws); got != "" {
		t.Errorf("no failures: %q", got)
	}
}
