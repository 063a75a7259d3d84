package docs

import (
	"flag"
	"fmt"
	"strings"
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
