package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPinsTheRepositorysFiles: the edits find what they pin in the repository's own
// kustomization and values (a renamed entry fails here, not in a release).
func TestPinsTheRepositorysFiles(t *testing.T) {
	k, err := PinImage(repoFile(t, "manifests/kustomization.yaml"), "ghcr.io/example/inferenceservice-operator", "v1.2.3", testDigest)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(k, "newName: ghcr.io/example/inferenceservice-operator\n  newTag: v1.2.3\n  digest: "+testDigest+"\n") {
		t.Errorf("kustomization:\n%s", k)
	}
	v, err := PinChartValues(repoFile(t, chartDir+"/values.yaml"), "ghcr.io/example/inferenceservice-operator", testDigest)
	if err != nil {
		t.Fatal(err)
	}
	var vals struct{ Image map[string]string }
	if err := yaml.Unmarshal([]byte(v), &vals); err != nil {
		t.Fatal(err)
	}
	if vals.Image["repository"] != "ghcr.io/example/inferenceservice-operator" || vals.Image["digest"] != testDigest || vals.Image["tag"] != "" {
		t.Errorf("image values %v", vals.Image)
	}
}

func TestSplitCRDs(t *testing.T) {
	stream := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: b\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: c\n"
	crds, rest, err := SplitCRDs(stream)
	if err != nil {
		t.Fatal(err)
	}
	if crds != "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: b\n" {
		t.Errorf("crds:\n%s", crds)
	}
	if rest != "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: c\n" {
		t.Errorf("rest:\n%s", rest)
	}
	if _, _, err := SplitCRDs("kind: Namespace\n"); err == nil {
		t.Error("a render without CRDs split without an error")
	}
}

func TestChecksumsIsSha256sumsFormat(t *testing.T) {
	got := Checksums(map[string][]byte{"b.zip": SHA256([]byte("b")), "a.tar.gz": SHA256(nil)})
	want := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a.tar.gz\n" +
		"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.zip\n"
	if got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
}

func TestKrewManifest(t *testing.T) {
	ps, err := ParsePlatforms(allPlatform)
	if err != nil {
		t.Fatal(err)
	}
	archives := map[Platform][]byte{}
	for _, p := range ps {
		archives[p] = SHA256([]byte(p.String()))
	}
	b, err := KrewManifest("v1.2.3", Homepage, "https://example.test/releases/download/v1.2.3/", archives)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
		Spec             struct {
			Version, Homepage, ShortDescription, Description string
			Platforms                                        []krewPlatform
		}
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "isvc" || m.Spec.Version != "v1.2.3" || m.Spec.ShortDescription == "" {
		t.Errorf("header %+v", m)
	}
	if len(m.Spec.Platforms) != 6 {
		t.Fatalf("%d platforms", len(m.Spec.Platforms))
	}
	for _, kp := range m.Spec.Platforms {
		p := Platform{kp.Selector.MatchLabels["os"], kp.Selector.MatchLabels["arch"]}
		if kp.URI != "https://example.test/releases/download/v1.2.3/"+PluginArchive("v1.2.3", p) || kp.SHA256 != strings.ToLower(kp.SHA256) || len(kp.SHA256) != 64 {
			t.Errorf("%s: %+v", p, kp)
		}
		if want := map[bool]string{true: "kubectl-isvc.exe", false: "kubectl-isvc"}[p.OS == "windows"]; kp.Bin != want {
			t.Errorf("%s: bin %s", p, kp.Bin)
		}
	}
}

func TestReleaseNotesGroupsByArea(t *testing.T) {
	notes := ReleaseNotes("v1.2.3", "v1.2.2", "r/i:v1.2.3@"+testDigest, "oci://r/charts/c", "https://d", []Commit{
		{"chart: a digest value", "aaa"},
		{"test/image: an index", "bbb"},
		{"chart: NOTES", "ccc"},
		{"Every alert has a runbook_url: docs", "ddd"},
	})
	for _, want := range []string{
		"## Changes since v1.2.2 (4 commits)\n\n### chart\n\n- chart: a digest value (aaa)\n- chart: NOTES (ccc)\n\n### test/image\n\n- test/image: an index (bbb)\n\n### other\n\n- Every alert",
		"helm install inferenceservice-operator oci://r/charts/c --version 1.2.3 -n inferenceservice-system --create-namespace\n",
		"kubectl apply -f https://d/crds.yaml -f https://d/install.yaml\n",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

func TestVersion(t *testing.T) {
	for v, ok := range map[string]bool{"v1.2.3": true, "v0.1.0-rc.1": true, "1.2.3": false, "v1.2": false, "v01.2.3": false, "latest": false} {
		if versionRE.MatchString(v) != ok {
			t.Errorf("%s: match %v", v, !ok)
		}
	}
}

// TestArchives: both archive kinds hold each file flat with its bytes, and the same files give
// the same tar.gz (stamped at the epoch).
func TestArchives(t *testing.T) {
	dir := t.TempDir()
	bin, notes := filepath.Join(dir, "kubectl-isvc"), filepath.Join(dir, "LICENSE")
	if err := os.WriteFile(bin, []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notes, []byte("license"), 0o644); err != nil {
		t.Fatal(err)
	}
	tgz, err := tarGzFiles([]string{bin, notes})
	if err != nil {
		t.Fatal(err)
	}
	zipped, err := zipFiles([]string{bin, notes})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"a.tar.gz": tgz, "a.zip": zipped} {
		files := archiveFiles(t, name, data)
		if string(files["kubectl-isvc"]) != "\x7fELF" || string(files["LICENSE"]) != "license" || len(files) != 2 {
			t.Errorf("%s holds %q", name, files)
		}
	}
	if again, _ := tarGzFiles([]string{bin, notes}); !bytes.Equal(again, tgz) {
		t.Error("the same files gave another tar.gz")
	}
}
