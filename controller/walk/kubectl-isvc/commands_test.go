package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/walk"
	"github.com/example/inferenceservice-operator/crd"
)

// exec runs one command line against w, failing the test on an error.
func (w world) run(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	s, out, errOut := streams()
	if err := run(context.Background(), args, s, w.connect); err != nil {
		t.Fatalf("kubectl isvc %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out.String(), errOut.String()
}

// TestOutputs: the screens are the renderers' (unchanged by default), -o json and -o yaml the
// same document (the walk's Report; list's rows as a List), -o wide list's extra columns.
func TestOutputs(t *testing.T) {
	w := newWorld(ours("team-a", "qwen3", "Qwen/Qwen3-8B"), ours("team-b", "llama", "meta-llama/Llama-3.1-8B"))

	rows, err := walk.Source{Kube: w.kube, Dyn: w.dyn}.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := walk.RenderList(&want, rows, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.run(t, "list", "-A"); got != want.String() {
		t.Errorf("list -A:\n%s\nwant the renderer's:\n%s", got, want.String())
	}
	if got, _ := w.run(t, "list", "-n", "team-a"); !strings.HasPrefix(got, "NAME ") || !strings.Contains(got, "qwen3") || strings.Contains(got, "llama") {
		t.Errorf("list -n team-a:\n%s", got)
	}
	if got, _ := w.run(t, "list", "-A", "-o", "wide"); !strings.Contains(strings.SplitN(got, "\n", 2)[0], "GPUS/REPLICA") || !strings.Contains(got, "   2/2\n") {
		t.Errorf("list -o wide:\n%s", got)
	}
	if out, errOut := w.run(t, "list", "-n", "empty"); out != "" || errOut != "No InferenceServices found.\n" {
		t.Errorf("list in an empty namespace: stdout %q stderr %q", out, errOut)
	}

	for _, format := range []string{"json", "yaml"} {
		out, _ := w.run(t, "list", "-A", "-o", format)
		var l rowList
		if err := yaml.Unmarshal([]byte(out), &l); err != nil { // YAML reads JSON too
			t.Fatal(err)
		}
		if l.Kind != "List" || l.APIVersion != "v1" || len(l.Items) != 2 || l.Items[0].Name != "qwen3" || l.Items[1].GPUsRequested != 2 {
			t.Errorf("list -o %s: %+v", format, l)
		}
		if format == "json" && !json.Valid([]byte(out)) {
			t.Errorf("list -o json is not JSON:\n%s", out)
		}
		if out, _ := w.run(t, "list", "-n", "empty", "-o", format); !strings.Contains(out, "items: []") && !strings.Contains(out, `"items": []`) {
			t.Errorf("list -o %s, no models: %s", format, out)
		}

		out, _ = w.run(t, "why", "qwen3", "-n", "team-a", "-o", format)
		var r walk.Report
		if err := yaml.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if r.Namespace != "team-a" || r.Name != "qwen3" || r.ISVC.Model != "Qwen/Qwen3-8B" || r.ISVC.GPUsPerReplica != 2 {
			t.Errorf("why -o %s: %+v", format, r)
		}
	}
	if got, _ := w.run(t, "why", "-n", "team-a", "qwen3"); !strings.HasPrefix(got, "InferenceService team-a/qwen3 (Qwen/Qwen3-8B)\n") {
		t.Errorf("why:\n%s", got)
	}
}

// TestBesideKServe: a cluster that serves KServe's InferenceService too (same kind, same short
// name isvc) holds a KServe model of the same name as ours and one of its own. The plugin
// reads ours only: list, why and completion never show KServe's, and every InferenceService
// request it makes names ai.example.com. It fails if any path resolved the kind or the short
// name through discovery and landed on serving.kserve.io.
func TestBesideKServe(t *testing.T) {
	w := newWorld(ours("team-a", "shared", "Qwen/Qwen3-8B"), ours("team-a", "mine", "m"),
		kserve("team-a", "shared"), kserve("team-a", "kserve-only"))

	out, _ := w.run(t, "list", "-n", "team-a", "-o", "json")
	var l rowList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 2 || l.Items[0].Name != "mine" || l.Items[1].Name != "shared" || l.Items[1].Model != "Qwen/Qwen3-8B" {
		t.Errorf("list: %+v, want mine and shared, ours", l.Items)
	}
	if out, _ := w.run(t, "list", "-A"); strings.Contains(out, "kserve-only") {
		t.Errorf("list -A shows KServe's model:\n%s", out)
	}
	if out, _ := w.run(t, "why", "shared", "-n", "team-a"); !strings.Contains(out, "(Qwen/Qwen3-8B)") {
		t.Errorf("why shared: not ours:\n%s", out)
	}
	s, _, _ := streams()
	err := run(context.Background(), []string{"why", "kserve-only", "-n", "team-a"}, s, w.connect)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("why kserve-only: %v, want not found", err)
	}
	if out, _ := w.run(t, "__complete", "why", "-n", "team-a", ""); !strings.HasPrefix(out, "mine\nshared\n:") {
		t.Errorf("completion: %q, want mine and shared", out)
	}

	n := 0
	for _, a := range w.dyn.Actions() {
		if r := a.GetResource(); r.Resource == crd.Plural {
			n++
			if r.Group != crd.GroupVersion.Group {
				t.Errorf("%s %s: the plugin asked for %s", a.GetVerb(), r, r.Group)
			}
		}
	}
	for _, a := range w.kube.Actions() {
		if a.GetVerb() == "get" && (a.GetResource().Resource == "group" || a.GetResource().Resource == "resource") {
			t.Errorf("discovery: %v; the plugin names its group and needs none", a)
		}
	}
	if n == 0 {
		t.Fatal("no InferenceService request was recorded")
	}
}

// TestCompletion: cobra's scripts for the shells, __complete's answers (the protocol kubectl
// uses through kubectl_complete-isvc) for the commands, names, -o and -n.
func TestCompletion(t *testing.T) {
	w := newWorld(ours("team-a", "qwen3", "m"), ours("default", "llama", "m"))
	for shell, want := range map[string]string{"bash": "__start_kubectl-isvc", "zsh": "#compdef kubectl-isvc", "fish": "complete -c kubectl-isvc"} {
		if out, _ := w.run(t, "completion", shell); !strings.Contains(out, want) {
			t.Errorf("completion %s: no %q in\n%.300s", shell, want, out)
		}
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{""}, "completion\tGenerate the autocompletion script"},
		{[]string{"why", ""}, "llama\n:4\n"},
		{[]string{"why", "-n", "team-a", ""}, "qwen3\n:4\n"},
		{[]string{"why", "qwen3", ""}, ":4\n"},
		{[]string{"list", "-o", ""}, "json\nyaml\nwide\n:4\n"},
	}
	for _, c := range cases {
		out, _ := w.run(t, append([]string{"__complete"}, c.args...)...)
		if !strings.Contains(out, c.want) {
			t.Errorf("__complete %q: %q, want %q", c.args, out, c.want)
		}
	}
	w.kube.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &corev1.NamespaceList{Items: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}}}, nil
	})
	if out, _ := w.run(t, "__complete", "list", "-n", ""); out != "team-a\n:4\n" {
		t.Errorf("__complete list -n: %q", out)
	}
}

// TestCompleteScript: kubectl_complete-isvc hands kubectl's words to the plugin's __complete.
func TestCompleteScript(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho \"$*\"\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl-isvc"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("kubectl_complete-isvc")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, "why", "-n", "team-a", "q")
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "__complete why -n team-a q\n" {
		t.Fatalf("%q %v", out, err)
	}
}

// TestVersion: the plugin's version (set by -ldflags -X main.version), the server's, -o json;
// --client asks no server; an unreachable server fails after the client's line.
func TestVersion(t *testing.T) {
	w := newWorld()
	w.kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &apiversion.Info{GitVersion: "v1.37.2"}
	if out, _ := w.run(t, "version"); out != "Client Version: dev\nServer Version: v1.37.2\n" {
		t.Errorf("version: %q", out)
	}
	out, _ := w.run(t, "version", "-o", "json")
	var v versions
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.ClientVersion != "dev" || v.ServerVersion.GitVersion != "v1.37.2" {
		t.Errorf("version -o json: %s %v", out, err)
	}
	s, got, _ := streams()
	if err := run(context.Background(), []string{"version", "--client"}, s, noCluster); err != nil || got.String() != "Client Version: dev\n" {
		t.Errorf("version --client: %q %v", got, err)
	}
	s, got, _ = streams()
	err := run(context.Background(), []string{"version"}, s, func(*genericclioptions.ConfigFlags) (clients, error) {
		return clients{}, errors.New("unreachable")
	})
	if err == nil || got.String() != "Client Version: dev\n" {
		t.Errorf("version, no server: %q %v", got, err)
	}
}
