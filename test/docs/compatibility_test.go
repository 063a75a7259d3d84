package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCompatibilityTable: each version docs/compatibility.md says is tested is the one its
// test module or test data pins (a version written as code is looked for, as written, in the
// file its row names, on the line naming its key when the row gives one). A row without a code
// version (one the machine installs) is not checked.
func TestCompatibilityTable(t *testing.T) {
	tables, err := TablesWith("docs/compatibility.md", "", "component")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, tb := range tables {
		for _, r := range tb.Rows {
			if len(r.Cells) < 4 {
				t.Errorf("%s: a row needs component, version, how and where pinned", tb.Where(r))
				continue
			}
			versions, files := Code(r.Cells[1]), Code(r.Cells[3])
			if len(versions) == 0 {
				continue
			}
			if len(files) == 0 {
				t.Errorf("%s: %s %s: no file named where it is pinned", tb.Where(r), r.Cells[0], versions[0])
				continue
			}
			b, err := os.ReadFile(filepath.Join(Root(), filepath.FromSlash(files[0])))
			if err != nil {
				t.Errorf("%s: %v", tb.Where(r), err)
				continue
			}
			// With a key (the module's path, the constant's name), the version must be on the
			// line that names it: another module at that version proves nothing.
			lines := []string{string(b)}
			if len(files) > 1 {
				lines = nil
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, files[1]) {
						lines = append(lines, l)
					}
				}
			}
			for _, v := range versions {
				if !slices.ContainsFunc(lines, func(l string) bool { return containsVersion(l, v) }) {
					t.Errorf("%s: %s %s is not what %s pins", tb.Where(r), r.Cells[0], v, strings.Join(files, " "))
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no compatibility row checked")
	}
	t.Logf("%d versions checked against their pins", checked)
}

// containsVersion says whether v is in s as a whole version: v1.5.0 is not in v1.5.01 or v11.5.0.
func containsVersion(s, v string) bool {
	return regexp.MustCompile(`(^|[^0-9A-Za-z.])` + regexp.QuoteMeta(v) + `($|[^0-9A-Za-z.])`).MatchString(s)
}
