package soak

// The trail of a repeated write: when the operators write one object more than once at rest,
// which replica sent each write, in what order, what the server answered and which status
// fields each changed from the previous body, so a hot loop's report names its cause.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/testenv"
)

// sentWrite is one write and the replica whose proxy saw it.
type sentWrite struct {
	replica string
	testenv.Request
}

// writeTrail lists, for each path written more than once, every write in order with its
// replica, answer and changed status fields (at most maxPaths paths, the most written first).
func writeTrail(ws []sentWrite, maxPaths int) string {
	if len(ws) == 0 {
		return ""
	}
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].At.Before(ws[j].At) })
	began := ws[0].At
	byPath := map[string][]sentWrite{}
	for _, w := range ws {
		byPath[w.Path] = append(byPath[w.Path], w)
	}
	var paths []string
	for p, list := range byPath {
		if len(list) > 1 {
			paths = append(paths, p)
		}
	}
	mostFirst(paths, func(p string) int { return len(byPath[p]) })
	var b strings.Builder
	for i, p := range paths {
		if i == maxPaths {
			fmt.Fprintf(&b, "  ... and %d more paths written more than once\n", len(paths)-maxPaths)
			break
		}
		fmt.Fprintf(&b, "  %s:\n", p)
		var prev map[string]string
		for _, w := range byPath[p] {
			cur := flattenStatus(w.Body)
			line := fmt.Sprintf("    +%5.1fs replica %s %s %d", w.At.Sub(began).Seconds(), w.replica, w.Method, w.Code)
			switch {
			case cur == nil:
			case prev == nil:
				line += " (the first in the window)"
			default:
				if d := diffFields(prev, cur); d != "" {
					line += " changed " + d
				} else {
					line += " changed nothing from the previous body"
				}
			}
			if cur != nil {
				prev = cur
			}
			fmt.Fprintln(&b, line)
		}
	}
	return b.String()
}

// flattenStatus maps a status write's body to its leaf fields ("status.phase",
// "status.conditions[Ready].message"); nil when the body is not a JSON object.
func flattenStatus(body []byte) map[string]string {
	if len(body) == 0 {
		return nil
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil
	}
	out := map[string]string{}
	flatten("status", obj["status"], out)
	return out
}

func flatten(prefix string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			flatten(prefix+"."+k, e, out)
		}
	case []any:
		for i, e := range t {
			key := fmt.Sprint(i)
			if m, ok := e.(map[string]any); ok {
				if typ, ok := m["type"].(string); ok {
					key = typ // conditions by type, as the API merges them
				}
			}
			flatten(fmt.Sprintf("%s[%s]", prefix, key), e, out)
		}
	default:
		raw, _ := json.Marshal(t)
		out[prefix] = string(raw)
	}
}

// diffFields names each field that differs, with its old and new value.
func diffFields(prev, cur map[string]string) string {
	keys := map[string]bool{}
	for k := range prev {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	var changed []string
	for k := range keys {
		if !reflect.DeepEqual(prev[k], cur[k]) {
			changed = append(changed, fmt.Sprintf("%s: %s -> %s", k, orNone(prev[k]), orNone(cur[k])))
		}
	}
	sort.Strings(changed)
	return strings.Join(changed, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// restWriteTrail is writeTrail of both proxies' non-Lease writes in [from, to).
func restWriteTrail(rs []*replica, from, to time.Time, maxPaths int) string {
	var ws []sentWrite
	for _, r := range rs {
		for _, req := range r.proxy.WriteRequests(from, to) {
			ws = append(ws, sentWrite{replica: r.name, Request: req})
		}
	}
	return writeTrail(ws, maxPaths)
}
