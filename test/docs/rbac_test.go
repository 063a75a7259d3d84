package docs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The namespaced component splits the operator's ClusterRole in two; the rows of its table
// say where each rule goes, in the column namespacedColumn.
const (
	rbacPage         = "docs/operations.md"
	namespacedColumn = "namespaced install"
	namespacedPatch  = "manifests/components/namespaced/cluster_role_patch.yaml"
	namespacedRoles  = "manifests/components/namespaced/watched_namespaces_rbac.yaml"
)

// roleKey names one role of one file: the docs' captions name a role so, and the manifests
// are read so.
type roleKey struct{ kind, name, file string }

func (k roleKey) String() string { return fmt.Sprintf("%s %s (%s)", k.kind, k.name, k.file) }

// grant is one verb on one resource (or non-resource URL) of one API group, for one name or
// every name (""): rules compared as sets of these, however the rows or rules group them.
type grant struct{ group, resource, name, verb string }

func (g grant) String() string {
	s := g.resource + " " + g.verb
	if strings.HasPrefix(g.resource, "/") {
		return s
	}
	group := g.group
	if group == "" {
		group = "core"
	}
	s = fmt.Sprintf("%s (%s) %s", g.resource, group, g.verb)
	if g.name != "" {
		s += " named " + g.name
	}
	return s
}

func grantsOf(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				out[grant{resource: u, verb: v}] = true
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					names := r.ResourceNames
					if len(names) == 0 {
						names = []string{""}
					}
					for _, n := range names {
						out[grant{g, res, n, v}] = true
					}
				}
			}
		}
	}
	return out
}

// manifestRoles reads every Role and ClusterRole with rules under manifests/ (the chart renders
// these same files, and its equality with kustomize is tested there), and the namespaced
// component's patch of the operator's ClusterRole. Roles of one name in one file (a Role per
// watched namespace) must grant the same.
func manifestRoles(t *testing.T) map[roleKey]map[grant]bool {
	t.Helper()
	root := Root()
	out := map[roleKey]map[grant]bool{}
	err := filepath.WalkDir(filepath.Join(root, "manifests"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "chart" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel == namespacedPatch {
			var ops []struct {
				Op, Path string
				Value    []rbacv1.PolicyRule
			}
			if err := yaml.Unmarshal(b, &ops); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if len(ops) != 1 || ops[0].Op != "replace" || ops[0].Path != "/rules" {
				return fmt.Errorf("%s: expected one replace of /rules", rel)
			}
			out[roleKey{"ClusterRole", "inferenceservice-operator", rel}] = grantsOf(ops[0].Value)
			return nil
		}
		dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := dec.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			var obj struct {
				Kind     string
				Metadata struct{ Name string }
				Rules    []rbacv1.PolicyRule
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil || (obj.Kind != "Role" && obj.Kind != "ClusterRole") || len(obj.Rules) == 0 {
				continue // not a role (a patch, a list, another kind), or one with no rules of its own
			}
			k := roleKey{obj.Kind, obj.Metadata.Name, rel}
			g := grantsOf(obj.Rules)
			if prev, ok := out[k]; ok && !sameGrants(prev, g) {
				return fmt.Errorf("%s: two %s %s grant different rules", rel, k.kind, k.name)
			}
			out[k] = g
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameGrants(a, b map[grant]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for g := range a {
		if !b[g] {
			return false
		}
	}
	return true
}

var (
	// captionRole is "ClusterRole `name` ... (`manifests/....yaml`)" in a table's caption.
	captionRole = regexp.MustCompile("\\b(ClusterRole|Role) `([^`]+)`[^`]*?\\(`([^`]+\\.yaml)`\\)")
	verbWord    = regexp.MustCompile(`^[a-z]+$`)
)

// documentedRoles reads the RBAC tables of the page: each table headed "resources", under a
// caption naming the role(s) it documents, one row per rule: resources (code spans; "named"
// then the resource names), the API group (a code span, "core" for "", or a non-resource URL's
// placeholder), the verbs.
func documentedRoles(t *testing.T) (map[roleKey]map[grant]string, []string) {
	t.Helper()
	tables, err := TablesWith(rbacPage, "", "resources")
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	out := map[roleKey]map[grant]string{}
	add := func(k roleKey, g grant, where string) {
		if out[k] == nil {
			out[k] = map[grant]string{}
		}
		out[k][g] = where
	}
	for _, tb := range tables {
		roles := captionRole.FindAllStringSubmatch(tb.Caption, -1)
		if len(roles) == 0 {
			problems = append(problems, fmt.Sprintf("%s:%d: an RBAC table whose caption names no \"Role `name` (`file.yaml`)\": %q", tb.Page, tb.Line, tb.Caption))
			continue
		}
		split := -1
		for i, h := range tb.Header {
			if h == namespacedColumn {
				split = i
			}
		}
		for _, r := range tb.Rows {
			if len(r.Cells) < 3 {
				problems = append(problems, tb.Where(r)+": an RBAC row needs resources, API group and verbs")
				continue
			}
			resCell, names := r.Cells[0], []string{""}
			if before, after, ok := strings.Cut(resCell, " named "); ok {
				resCell, names = before, Code(after)
			}
			resources := Code(resCell)
			group := ""
			if c := Code(r.Cells[1]); len(c) == 1 {
				group = c[0]
			} else if r.Cells[1] != "core" && !strings.HasPrefix(r.Cells[1], "(non-resource") {
				problems = append(problems, fmt.Sprintf("%s: API group %q: a code span, core, or (non-resource URL)", tb.Where(r), r.Cells[1]))
			}
			var verbs []string
			for _, v := range strings.Split(r.Cells[2], ",") {
				v = strings.TrimSpace(v)
				if !verbWord.MatchString(v) {
					problems = append(problems, fmt.Sprintf("%s: verb %q", tb.Where(r), v))
				}
				verbs = append(verbs, v)
			}
			var grants []grant
			for _, res := range resources {
				for _, n := range names {
					for _, v := range verbs {
						grants = append(grants, grant{group, res, n, v})
					}
				}
			}
			for _, m := range roles {
				for _, g := range grants {
					add(roleKey{m[1], m[2], m[3]}, g, tb.Where(r))
				}
			}
			if split < 0 {
				continue
			}
			var k roleKey
			switch r.Cells[split] {
			case "Role":
				k = roleKey{"Role", roles[0][2], namespacedRoles}
			case "ClusterRole":
				k = roleKey{"ClusterRole", roles[0][2], namespacedPatch}
			default:
				problems = append(problems, fmt.Sprintf("%s: %q is %q: Role or ClusterRole", tb.Where(r), namespacedColumn, r.Cells[split]))
				continue
			}
			for _, g := range grants {
				add(k, g, tb.Where(r))
			}
		}
	}
	return out, problems
}

// TestRBACTablesMatchManifests: every Role and ClusterRole of manifests/ has its table in
// docs/operations.md, every rule a row, and every row a rule.
func TestRBACTablesMatchManifests(t *testing.T) {
	code := manifestRoles(t)
	docs, problems := documentedRoles(t)
	for k, granted := range code {
		rows, ok := docs[k]
		if !ok {
			problems = append(problems, fmt.Sprintf("missing RBAC table for %s: no table captioned with it in %s", k, rbacPage))
			continue
		}
		for g := range granted {
			if _, ok := rows[g]; !ok {
				problems = append(problems, fmt.Sprintf("missing RBAC row: %s grants %s", k, g))
			}
		}
		for g, where := range rows {
			if !granted[g] {
				problems = append(problems, fmt.Sprintf("%s: extra RBAC row: %s does not grant %s", where, k, g))
			}
		}
	}
	for k := range docs {
		if _, ok := code[k]; !ok {
			problems = append(problems, fmt.Sprintf("extra RBAC table: %s is not a role with rules in that file", k))
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	n := 0
	for _, g := range code {
		n += len(g)
	}
	t.Logf("%d roles, %d grants (verb x resource x name) checked", len(code), n)
}
