package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// headingLine matches an ATX heading, "## Title".
var headingLine = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)

// Table is one Markdown table of a page, where the tests that hold the docs to the code read
// it: the heading it sits under, the paragraph just above it (its caption), its header
// cells and its rows, each with its line for the failure message.
type Table struct {
	Page    string
	Line    int
	Heading string
	Caption string
	Header  []string
	Rows    []Row
}

// Row is one body row of a Table.
type Row struct {
	Line  int
	Cells []string
}

// Where says where a row is, as a failure names it: page:line.
func (t Table) Where(r Row) string { return fmt.Sprintf("%s:%d", t.Page, r.Line) }

// module is the main module's path: its go.mod marks the repository's root.
const module = "github.com/example/inferenceservice-operator"

// Root is the repository's directory: the nearest directory up from the test's working
// directory (its package's) whose go.mod is the main module's, so a test of any package reads
// the same pages (-trimpath or not).
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module "+module+"\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("docs: no go.mod of " + module + " above the working directory")
		}
		dir = parent
	}
}

// Tables reads every table of a page (a path relative to the repository), outside fenced code.
func Tables(page string) ([]Table, error) {
	b, err := os.ReadFile(filepath.Join(Root(), filepath.FromSlash(page)))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	var out []Table
	heading, fence := "", ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := headingLine.FindStringSubmatch(l); m != nil {
			heading = m[2]
			continue
		}
		if !strings.HasPrefix(trimmed, "|") || i+1 >= len(lines) || !isDelimiter(lines[i+1]) {
			continue
		}
		t := Table{Page: page, Line: i + 1, Heading: heading, Header: cells(trimmed)}
		// The caption is the paragraph just above, joined into one line (a blank line between
		// them allowed, a heading not).
		j := i - 1
		for j >= 0 && strings.TrimSpace(lines[j]) == "" {
			j--
		}
		var caption []string
		for ; j >= 0; j-- {
			c := strings.TrimSpace(lines[j])
			if c == "" || strings.HasPrefix(c, "#") || strings.HasPrefix(c, "|") {
				break
			}
			caption = append([]string{c}, caption...)
		}
		t.Caption = strings.Join(caption, " ")
		i += 2
		for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
			t.Rows = append(t.Rows, Row{Line: i + 1, Cells: cells(strings.TrimSpace(lines[i]))})
		}
		i--
		out = append(out, t)
	}
	return out, nil
}

// TablesWith returns the tables of a page whose first header cell is first, under a heading
// that is heading (any heading when empty).
func TablesWith(page, heading, first string) ([]Table, error) {
	all, err := Tables(page)
	if err != nil {
		return nil, err
	}
	var out []Table
	for _, t := range all {
		if len(t.Header) > 0 && t.Header[0] == first && (heading == "" || t.Heading == heading) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no table headed %q under the heading %q", page, first, heading)
	}
	return out, nil
}

// isDelimiter says whether a line is a table's delimiter row: | --- | :---: |.
func isDelimiter(l string) bool {
	l = strings.TrimSpace(l)
	if !strings.HasPrefix(l, "|") {
		return false
	}
	for _, c := range cells(l) {
		if strings.Trim(c, ":-") != "" || !strings.Contains(c, "-") {
			return false
		}
	}
	return true
}

// cells splits a table line into its cells, trimmed: a '|' inside a code span or escaped as
// \| stays in its cell, as GitHub renders it.
func cells(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var out []string
	var b strings.Builder
	inCode := false
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case c == '\\' && i+1 < len(l) && l[i+1] == '|':
			b.WriteByte('|')
			i++
		case c == '`':
			inCode = !inCode
			b.WriteByte(c)
		case c == '|' && !inCode:
			out = append(out, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(out, strings.TrimSpace(b.String()))
}

// Code returns the code spans of a cell, in order: `--workers` -> --workers.
func Code(cell string) []string {
	var out []string
	for {
		i := strings.IndexByte(cell, '`')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(cell[i+1:], '`')
		if j < 0 {
			return out
		}
		out = append(out, cell[i+1:i+1+j])
		cell = cell[i+1+j+1:]
	}
}

// Compare holds a documented set against the code's: each name a row documents that the code
// does not have is extra (named with its row), each name the code has that no row documents is
// missing (named with where the code defines it). A documented name ending in '*' documents
// every name of the code with that prefix, and is extra when there is none.
func Compare(what string, documented, code map[string]string) []string {
	var out []string
	covered := map[string]bool{}
	for name, where := range documented {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			n := 0
			for c := range code {
				if strings.HasPrefix(c, prefix) {
					covered[c] = true
					n++
				}
			}
			if n == 0 {
				out = append(out, fmt.Sprintf("%s: extra %s row %q: no %s of the code starts with %q", where, what, name, what, prefix))
			}
			continue
		}
		if _, ok := code[name]; !ok {
			out = append(out, fmt.Sprintf("%s: extra %s row %q: the code defines no such %s", where, what, name, what))
			continue
		}
		covered[name] = true
	}
	for name, where := range code {
		if !covered[name] {
			out = append(out, fmt.Sprintf("missing %s row %q (defined in %s)", what, name, where))
		}
	}
	sort.Strings(out)
	return out
}
