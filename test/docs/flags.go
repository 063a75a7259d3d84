package docs

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// FlagsDocumented reads the flags a page's flags tables document under a heading: every
// `--name` code span of a row's first cell, keyed by name with the row's page:line.
func FlagsDocumented(page, heading string) (map[string]string, error) {
	tables, err := TablesWith(page, heading, "flag")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range tables {
		for _, r := range t.Rows {
			n := 0
			for _, c := range Code(r.Cells[0]) {
				if name, ok := strings.CutPrefix(c, "--"); ok {
					out[name] = t.Where(r)
					n++
				}
			}
			if n == 0 {
				return nil, fmt.Errorf("%s: a flags row without a `--flag` in its first cell", t.Where(r))
			}
		}
	}
	return out, nil
}

// FlagsDefined runs define (a binary's flag registrations on flag.CommandLine) and returns the
// flags it added, each named with its binary, leaving out those registered before (go test's).
func FlagsDefined(binary string, define func()) map[string]string {
	before := map[string]bool{}
	flag.CommandLine.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	define()
	out := map[string]string{}
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if !before[f.Name] {
			out[f.Name] = binary
		}
	})
	return out
}

// boolOn and boolOff are how a default cell says true or false.
var (
	boolOn  = regexp.MustCompile(`\b(true|on)\b`)
	boolOff = regexp.MustCompile(`\b(false|off)\b`)
)

// FlagDefaults holds each documented flag's default cell (the row's second) to the default the
// code registers, read from flag.CommandLine after the binary's flags are defined: a boolean
// as true/on or false/off, a duration as written short (10m, not 10m0s), anything else as
// written; an empty default (the cells say it in words: all, none, empty) and a wildcard row
// are not checked. A row of several flags holds all their defaults.
func FlagDefaults(page, heading string) ([]string, error) {
	tables, err := TablesWith(page, heading, "flag")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range tables {
		for _, r := range t.Rows {
			if len(r.Cells) < 2 {
				continue
			}
			cell := r.Cells[1]
			for _, c := range Code(r.Cells[0]) {
				name, ok := strings.CutPrefix(c, "--")
				if !ok {
					continue
				}
				f := flag.CommandLine.Lookup(name)
				if f == nil {
					continue // Compare names it
				}
				d := defaultAsWritten(f.DefValue)
				var found bool
				switch d {
				case "":
					found = true
				case "true":
					found = boolOn.MatchString(cell)
				case "false":
					found = boolOff.MatchString(cell)
				default:
					found = strings.Contains(cell, d)
				}
				if !found {
					out = append(out, fmt.Sprintf("%s: --%s defaults to %q, which the row's default %q does not say", t.Where(r), name, d, cell))
				}
			}
		}
	}
	return out, nil
}

// defaultAsWritten is a flag's default as the docs write it: durations short (1m, 10m, 1h, 0),
// the machine's temporary directory as $TMPDIR.
func defaultAsWritten(d string) string {
	if tmp := os.TempDir(); tmp != "" && strings.HasPrefix(d, tmp+string(os.PathSeparator)) {
		return "$TMPDIR" + d[len(tmp):]
	}
	if v, err := time.ParseDuration(d); err == nil && strings.ContainsAny(d, "hms") {
		if v == 0 {
			return "0"
		}
		s := v.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	return d
}
