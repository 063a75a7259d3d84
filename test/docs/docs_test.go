// Package docs checks the project's documentation as a reader meets it: README.md, CHANGELOG.md,
// SECURITY.md and every page under docs/. Every relative link and image must lead to a file or
// directory that exists, every #anchor to a heading of the page it names (GitHub's anchor rules),
// the README must stay a first screen (at most maxReadmeLines lines, with the two commands it
// promises) and link every page. A section moved between pages without its links moved with it
// fails here, not in a reader's browser.
//
// The tables that say what the code does are read against the code, as it is when the test
// runs: the RBAC tables against every Role and ClusterRole of manifests/ (rbac_test.go), the
// metrics tables against the collectors each binary registers (metrics_test.go), the fuzz
// targets against the tree's func Fuzz and the Makefile (fuzz_test.go), the versions tested
// against the files that pin them (compatibility_test.go). The flags tables are checked beside
// each binary's main (docs_flags_test.go), with this package's table reader (tables.go).
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, seen from this package's directory (go test runs in it).
const root = "../.."

// maxReadmeLines keeps the README a first screen and a map; the detail lives in docs/.
const maxReadmeLines = 320

// rootPages are the pages beside the README that it links: what changed, and how to report a
// vulnerability.
var rootPages = []string{"CHANGELOG.md", "SECURITY.md"}

// pages is README.md, rootPages and every docs/*.md, as paths relative to the repository.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	out := []string{"README.md"}
	// The root's other pages a reader reaches from the README.
	for _, p := range rootPages {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		docs = append(docs, filepath.Join(root, p))
	}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	sort.Strings(out[1:])
	return out
}

// link is one Markdown link or image target and where it was written.
type link struct {
	line   int
	target string
}

var (
	// inlineLink matches [text](target) and ![alt](target) once code spans are gone; the target
	// may carry a title ("...") after a space, or be written <in angle brackets>.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+"[^"]*")?\s*\)`)
	// refDefinition matches a reference-style definition: [label]: target.
	refDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// atxHeading matches "## Title", with optional closing hashes.
	atxHeading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	// htmlAnchor matches <a name="x"> and id="x", which GitHub also lets a fragment reach.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	// headingLink keeps a link's text in a heading: GitHub anchors the rendered text.
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// parsed is what a Markdown file offers to links: its links, outside code, and its anchors.
type parsed struct {
	lines   int
	links   []link
	anchors map[string]bool
}

// parse reads a Markdown file, skipping fenced code blocks (a "# comment" in a shell block is no
// heading, a "[x](y)" in a YAML block no link).
func parse(path string) (parsed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return parsed{}, err
	}
	text := strings.TrimSuffix(string(b), "\n")
	lines := strings.Split(text, "\n")
	p := parsed{lines: len(lines), anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" ") == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for _, c := range trimmed[3:] {
				if string(c) != trimmed[:1] {
					break
				}
				fence += string(c)
			}
			continue
		}
		if m := atxHeading.FindStringSubmatch(l); m != nil {
			slug := anchor(m[2])
			// GitHub suffixes repeated headings: x, x-1, x-2.
			if n := seen[slug]; n > 0 {
				p.anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				p.anchors[slug] = true
			}
			seen[slug]++
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			p.anchors[m[1]] = true
		}
		code := stripCodeSpans(l)
		for _, m := range inlineLink.FindAllStringSubmatch(code, -1) {
			p.links = append(p.links, link{line: i + 1, target: strings.Trim(m[1], "<>")})
		}
		if m := refDefinition.FindStringSubmatch(code); m != nil {
			p.links = append(p.links, link{line: i + 1, target: strings.Trim(m[1], "<>")})
		}
	}
	return p, nil
}

// stripCodeSpans removes inline code, which never holds a link: a run of backticks up to the
// next run of the same length. An unmatched run is literal text, as CommonMark reads it.
func stripCodeSpans(l string) string {
	var b strings.Builder
	for i := 0; i < len(l); {
		if l[i] != '`' {
			b.WriteByte(l[i])
			i++
			continue
		}
		n := 0
		for i+n < len(l) && l[i+n] == '`' {
			n++
		}
		run := l[i : i+n]
		end := -1
		for j := i + n; j < len(l); {
			k := strings.Index(l[j:], run)
			if k < 0 {
				break
			}
			k += j
			m := 0
			for k+m < len(l) && l[k+m] == '`' {
				m++
			}
			if m == n {
				end = k
				break
			}
			j = k + m
		}
		if end < 0 {
			b.WriteString(run)
			i += n
			continue
		}
		i = end + n
	}
	return b.String()
}

// anchor is GitHub's fragment for a heading: the rendered text lowercased, each space a '-',
// and every other character that is not a letter, digit, '-' or '_' dropped.
func anchor(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Multi-tenancy: a team's GPU quota with Kueue":                        "multi-tenancy-a-teams-gpu-quota-with-kueue",
		"The walk from your terminal: `kubectl isvc`":                         "the-walk-from-your-terminal-kubectl-isvc",
		"v1beta1 (opt-in: `kubectl apply -k manifests/overlays/v1beta1/`)":    "v1beta1-opt-in-kubectl-apply--k-manifestsoverlaysv1beta1",
		"Routing by what the server knows: InferencePool and endpoint picker": "routing-by-what-the-server-knows-inferencepool-and-endpoint-picker",
		"snake_case and [a link](x.md)":                                       "snake_case-and-a-link",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// external says whether a target leaves the repository: the test checks only what it can see.
func external(target string) bool {
	lower := strings.ToLower(target)
	return strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") ||
		strings.HasPrefix(lower, "mailto:")
}

// TestLinksResolve: every relative link and image of README.md and docs/*.md names a file or
// directory that exists, and every #anchor a heading of the Markdown file it points into.
func TestLinksResolve(t *testing.T) {
	cache := map[string]parsed{}
	load := func(path string) (parsed, error) {
		if p, ok := cache[path]; ok {
			return p, nil
		}
		p, err := parse(path)
		if err == nil {
			cache[path] = p
		}
		return p, err
	}
	checked := 0
	for _, page := range pages(t) {
		src := filepath.Join(root, filepath.FromSlash(page))
		p, err := load(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.links {
			if l.target == "" {
				t.Errorf("%s:%d: empty link target", page, l.line)
				continue
			}
			if external(l.target) {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(l.target, "#")
			dest := src
			if path != "" {
				dest = filepath.Join(filepath.Dir(src), filepath.FromSlash(path))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, l.line, l.target, path)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(strings.ToLower(dest), ".md") {
				continue
			}
			target, err := load(dest)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", page, l.line, l.target, err)
				continue
			}
			if !target.anchors[frag] {
				t.Errorf("%s:%d: link %q: no heading with anchor #%s in %s", page, l.line, l.target, frag, relOrSelf(dest))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link checked: the parser found none")
	}
	t.Logf("%d relative links checked", checked)
}

func relOrSelf(path string) string {
	if rel, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(rel)
	}
	return path
}

// TestReadmeIsAFirstScreen: the README stays short, keeps the two commands it promises, and
// links every docs page, so nothing under docs/ is out of a reader's reach.
func TestReadmeIsAFirstScreen(t *testing.T) {
	readme := filepath.Join(root, "README.md")
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parse(readme)
	if err != nil {
		t.Fatal(err)
	}
	if p.lines > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to a docs/ page", p.lines, maxReadmeLines)
	}
	for _, cmd := range []string{"make demo", "make test"} {
		if !strings.Contains(string(b), cmd) {
			t.Errorf("README.md does not mention %q", cmd)
		}
	}
	linked := map[string]bool{}
	for _, l := range p.links {
		if external(l.target) {
			continue
		}
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.ToSlash(filepath.Clean(path))] = true
	}
	for _, page := range pages(t)[1:] {
		if !linked[page] {
			t.Errorf("README.md does not link %s", page)
		}
	}
}
