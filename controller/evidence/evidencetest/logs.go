// Package evidencetest holds the test doubles of what the evidence reader reads through a real
// client, shared by the evidence package's tests and the controller's.
package evidencetest

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// LogEndpoint is the API server's pods/log endpoint for one pod: it answers each read with the
// log of the run asked for, or a Forbidden Status when Code is 403, and records the reads. The
// fake clientset's GetLogs answers "fake logs" whatever is asked, so tests serve this instead.
// It answers a namespace's Events list too, with Events (an EventList's JSON) or EventsCode.
type LogEndpoint struct {
	mu         sync.Mutex
	Current    string // the log of the container's current run
	Prev       string // of its previous run (?previous=true)
	Code       int
	Events     string
	EventsCode int
	reads      []string
}

func (l *LogEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := r.URL.Query()
	if strings.HasSuffix(r.URL.Path, "/events") {
		l.reads = append(l.reads, fmt.Sprintf("%s %s fieldSelector=%s limit=%s", r.Method, r.URL.Path, q.Get("fieldSelector"), q.Get("limit")))
		w.Header().Set("Content-Type", "application/json")
		if l.EventsCode != 0 {
			w.WriteHeader(l.EventsCode)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":%d}`, l.EventsCode)
			return
		}
		fmt.Fprint(w, cmp.Or(l.Events, `{"kind":"EventList","apiVersion":"v1","items":[]}`))
		return
	}
	l.reads = append(l.reads, fmt.Sprintf("%s %s container=%s previous=%s tailLines=%s limitBytes=%s timestamps=%s",
		r.Method, r.URL.Path, q.Get("container"), q.Get("previous"), q.Get("tailLines"), q.Get("limitBytes"), q.Get("timestamps")))
	if l.Code == http.StatusForbidden {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(l.Code)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,`+
			`"message":"pods \"qwen3-abc-1\" is forbidden: User \"system:serviceaccount:inferenceservice-system:inferenceservice-operator\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"default\""}`)
		return
	}
	if q.Get("previous") == "true" {
		fmt.Fprint(w, l.Prev)
	} else {
		fmt.Fprint(w, l.Current)
	}
}

// Take returns the reads since the last Take.
func (l *LogEndpoint) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reads
	l.reads = nil
	return out
}

// Stamp is a log line as the kubelet returns it with timestamps.
func Stamp(at time.Time, line string) string { return at.Format(time.RFC3339Nano) + " " + line + "\n" }

// RunLog is the log of run n of a container whose first run started at start, each run a
// minute, ending 5 s before its minute: argparse's usage and error.
func RunLog(start time.Time, n int32, arg string) string {
	finished := start.Add(time.Duration(n)*time.Minute - 5*time.Second)
	return Stamp(finished.Add(-2*time.Second), "usage: vllm serve [model_tag] [options]") +
		Stamp(finished.Add(-time.Second), "vllm serve: error: unrecognized arguments: "+arg)
}
