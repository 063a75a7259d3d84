package soak

// The requests the load lost, accounted for: each failure falls in the window of the fault
// that was striking or converging after it (from its start to the convergence check that
// followed), or in none; per window, by kind of error, so a report says which faults cost
// requests and how.

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// failure is one failed request of the load.
type failure struct {
	at  time.Time
	msg string
	// others: how many other pods were ready when the request was sent (the load's view,
	// refreshed every two seconds): a failure with others > 0 could have been served by them.
	others int
}

// faultWindow is a fault's span: its start to the convergence after it.
type faultWindow struct {
	kind     string
	from, to time.Time
}

// errorClass names a failure's kind in a few words (the dial refused, the connection cut
// mid-answer, a timeout, an HTTP status).
func errorClass(msg string) string {
	switch {
	case strings.Contains(msg, "connection refused"):
		return "refused"
	case strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset"):
		return "cut"
	case strings.Contains(msg, "Client.Timeout") || strings.Contains(msg, "deadline exceeded"):
		return "timeout"
	case strings.Contains(msg, "no route to host") || strings.Contains(msg, "i/o timeout"):
		return "unreachable"
	}
	if code, _, ok := strings.Cut(msg, " "); ok && len(code) == 3 && code[0] >= '1' && code[0] <= '5' {
		return "HTTP " + code
	}
	return "other"
}

// lostByFault counts failures per fault kind (the first window holding each failure; windows
// do not overlap, as faults run one at a time) and per error class, and how many of them were
// sent while another pod was ready; "(no fault)" holds the rest.
func lostByFault(fs []failure, ws []faultWindow) string {
	if len(fs) == 0 {
		return ""
	}
	type tally struct {
		n, servable int
		byClass     map[string]int
	}
	per := map[string]*tally{}
	for _, f := range fs {
		kind := "(no fault)"
		for _, w := range ws {
			if !f.at.Before(w.from) && !f.at.After(w.to) {
				kind = w.kind
				break
			}
		}
		t := per[kind]
		if t == nil {
			t = &tally{byClass: map[string]int{}}
			per[kind] = t
		}
		t.n++
		if f.others > 0 {
			t.servable++
		}
		t.byClass[errorClass(f.msg)]++
	}
	kinds := make([]string, 0, len(per))
	for k := range per {
		kinds = append(kinds, k)
	}
	mostFirst(kinds, func(k string) int { return per[k].n })
	var b strings.Builder
	for _, k := range kinds {
		t := per[k]
		classes := make([]string, 0, len(t.byClass))
		for c, n := range t.byClass {
			classes = append(classes, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(classes)
		fmt.Fprintf(&b, "  %-18s %5d  %5d with another pod ready  (%s)\n", k, t.n, t.servable, strings.Join(classes, ", "))
	}
	return b.String()
}
