package main

import (
	"testing"
	"time"
)

// pollUntil polls cond until it holds, failing the test after 10 s with cond's last word.
func pollUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(10 * time.Millisecond) // a poll interval, not a wait for state
	}
	t.Fatalf("%s: not within 10s; last: %s", what, last)
}
