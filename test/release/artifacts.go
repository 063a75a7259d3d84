package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// versionRE is a release version as the tag names it: v and a semantic version (Helm's chart
// version is the same without the v).
var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// Platform is one os/arch the plugin is built for.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatforms reads "linux/amd64,darwin/arm64,...".
func ParsePlatforms(s string) ([]Platform, error) {
	var ps []Platform
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		os, arch, ok := strings.Cut(f, "/")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("platform %q: want os/arch", f)
		}
		ps = append(ps, Platform{os, arch})
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("no platform in %q", s)
	}
	return ps, nil
}

// PluginBinary is the plugin's executable name on p (kubectl finds plugins by this name).
func PluginBinary(p Platform) string {
	if p.OS == "windows" {
		return "kubectl-isvc.exe"
	}
	return "kubectl-isvc"
}

// PluginArchive is the archive's file name: a zip on Windows, where tar.gz is not at hand.
func PluginArchive(version string, p Platform) string {
	ext := ".tar.gz"
	if p.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("kubectl-isvc_%s_%s_%s%s", version, p.OS, p.Arch, ext)
}

// Checksums is sha256sum's format, sorted by name, so `sha256sum -c checksums.txt` checks it.
func Checksums(sums map[string][]byte) string {
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sums[n]), n)
	}
	return b.String()
}

// SHA256 is the digest of data.
func SHA256(data []byte) []byte {
	s := sha256.Sum256(data)
	return s[:]
}

// krewPlatform is one entry of a krew manifest's spec.platforms.
type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bin    string `json:"bin"`
}

// KrewManifest is the plugin's krew manifest (krew.googlecontainertools.github.com/v1alpha2):
// one platform per archive, selected by os and arch, downloaded from download (the forge
// release's URL prefix) and checked against its sha256.
func KrewManifest(version, homepage, download string, archives map[Platform][]byte) ([]byte, error) {
	ps := make([]Platform, 0, len(archives))
	for p := range archives {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].String() < ps[j].String() })
	var platforms []krewPlatform
	for _, p := range ps {
		var kp krewPlatform
		kp.Selector.MatchLabels = map[string]string{"os": p.OS, "arch": p.Arch}
		kp.URI = strings.TrimSuffix(download, "/") + "/" + PluginArchive(version, p)
		kp.SHA256 = hex.EncodeToString(archives[p])
		kp.Bin = PluginBinary(p)
		platforms = append(platforms, kp)
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "isvc"},
		"spec": map[string]any{
			"version":          version,
			"homepage":         homepage,
			"shortDescription": "Why an InferenceService does not serve, on one screen",
			"description": "kubectl isvc why NAME walks an InferenceService's layers (the isvc, its Deployment,\n" +
				"pods, Service, autoscaler) to the first one that does not add up, with its events and\n" +
				"the runbook's next step; kubectl isvc list shows every model at a glance.\n",
			"platforms": platforms,
		},
	})
}

// PinImage is the kustomization with the operator's image entry set to the pinned reference
// (name:tag@digest): the release's manifests run exactly the image its chart runs.
func PinImage(kustomization, repository, tag, digest string) (string, error) {
	const entry = "- name: inferenceservice-operator\n  newTag: latest\n"
	if !strings.Contains(kustomization, entry) {
		return "", fmt.Errorf("kustomization.yaml has no %q to pin", entry)
	}
	return strings.Replace(kustomization, entry, fmt.Sprintf(
		"- name: inferenceservice-operator\n  newName: %s\n  newTag: %s\n  digest: %s\n", repository, tag, digest), 1), nil
}

// PinChartValues is the chart's values.yaml with the image's repository and digest set; the
// tag stays empty, which is the chart's appVersion (the release's version).
func PinChartValues(values, repository, digest string) (string, error) {
	for _, r := range []struct{ old, new string }{
		{"  repository: inferenceservice-operator\n", "  repository: " + repository + "\n"},
		{"  tag: \"\"\n", "  tag: \"\"\n"},
		{"  digest: \"\"\n", "  digest: " + digest + "\n"},
	} {
		if strings.Count(values, r.old) != 1 {
			return "", fmt.Errorf("values.yaml: want one %q", r.old)
		}
		values = strings.Replace(values, r.old, r.new, 1)
	}
	return values, nil
}

// SplitCRDs splits a rendered stream into its CustomResourceDefinitions and the rest, each a
// stream again, so the CRDs can be applied (and established) before what uses them.
func SplitCRDs(stream string) (crds, rest string, err error) {
	var c, r []string
	for _, doc := range strings.Split("\n"+stream, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return "", "", err
		}
		doc = strings.TrimPrefix(doc, "\n")
		if !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		if meta.Kind == "CustomResourceDefinition" {
			c = append(c, doc)
		} else {
			r = append(r, doc)
		}
	}
	if len(c) == 0 || len(r) == 0 {
		return "", "", fmt.Errorf("%d CRDs and %d other objects rendered, want some of each", len(c), len(r))
	}
	return strings.Join(c, "---\n"), strings.Join(r, "---\n"), nil
}

// Commit is one line of the log: its subject and short hash.
type Commit struct{ Subject, Hash string }

// area is what a subject says it changed ("chart: ..." is chart); a subject whose head is not
// a short area is other.
func area(subject string) string {
	head, _, ok := strings.Cut(subject, ": ")
	if !ok || len(head) > 40 || strings.Count(head, " ") > 2 {
		return "other"
	}
	return head
}

// ReleaseNotes lists the commits since prev ("" for the first release), grouped by area in
// the order of their first appearance (newest first), with how to install this version.
func ReleaseNotes(version, prev, image, chartRepo, download string, commits []Commit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# inferenceservice-operator %s\n\n", version)
	fmt.Fprintf(&b, "Image: `%s` (linux/amd64, linux/arm64)\n\n", image)
	b.WriteString("Install (Helm, or the manifests):\n\n```sh\n")
	fmt.Fprintf(&b, "helm install inferenceservice-operator %s --version %s -n inferenceservice-system --create-namespace\n", chartRepo, strings.TrimPrefix(version, "v"))
	fmt.Fprintf(&b, "kubectl apply -f %s/crds.yaml -f %s/install.yaml\n```\n\n", download, download)
	since := "the first commit"
	if prev != "" {
		since = prev
	}
	fmt.Fprintf(&b, "## Changes since %s (%d commits)\n", since, len(commits))
	var order []string
	groups := map[string][]Commit{}
	for _, c := range commits {
		a := area(c.Subject)
		if _, ok := groups[a]; !ok {
			order = append(order, a)
		}
		groups[a] = append(groups[a], c)
	}
	for _, a := range order {
		fmt.Fprintf(&b, "\n### %s\n\n", a)
		for _, c := range groups[a] {
			fmt.Fprintf(&b, "- %s (%s)\n", c.Subject, c.Hash)
		}
	}
	return b.String()
}
