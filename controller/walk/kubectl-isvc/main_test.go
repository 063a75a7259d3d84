package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// streams are a command's stdout and stderr, kept for the test to read.
func streams() (genericiooptions.IOStreams, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, &out, &errOut
}

// noCluster fails a test that reaches for the cluster where it should not.
func noCluster(*genericclioptions.ConfigFlags) (clients, error) {
	return clients{}, errors.New("no cluster in this test")
}

// TestArgs: flags before and after the command's arguments, as kubectl users type them, and
// refusals that say what to type instead (no cluster is reached).
func TestArgs(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{[]string{}, "a command is required"},
		{[]string{"why"}, "usage: kubectl isvc why NAME"},
		{[]string{"why", "a", "b", "--kubeconfig=/nonexistent"}, "usage: kubectl isvc why NAME"},
		{[]string{"list", "-o", "xml"}, `--output "xml": json, yaml or wide`},
		{[]string{"why", "qwen3", "-o", "wide"}, "--output wide: only list has columns to add"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"list", "extra"}, "usage: kubectl isvc list"},
		{[]string{"why", "qwen3", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"why", "qwen3", "-A"}, "unknown shorthand flag: 'A'"}, // -A is list's
		{[]string{"list", "--request-timeout", "soon"}, `--request-timeout "soon"`},
	}
	for _, c := range cases {
		s, _, _ := streams()
		err := run(context.Background(), c.args, s, noCluster)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.wantErr)
		}
	}
}

// TestKubeconfigMissing: the real connection reports an explicit kubeconfig it cannot read.
func TestKubeconfigMissing(t *testing.T) {
	s, _, _ := streams()
	err := run(context.Background(), []string{"list", "--kubeconfig=/nonexistent"}, s, connectFlags)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent") {
		t.Fatalf("error %v, want one naming /nonexistent", err)
	}
}

const kubeconfig = `apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users:
- {name: a, user: {token: token-a}}
- {name: b, user: {token: token-b}}
contexts:
- {name: a, context: {cluster: a, user: a, namespace: team-a}}
- {name: b, context: {cluster: b, user: b, namespace: team-b}}
`

// TestKubectlFlags: kubectl's own flags, before or after the command's arguments, reach the
// REST config and the namespace as kubectl would use them (cli-runtime's ConfigFlags).
func TestKubectlFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                string
		args                []string
		host, token, ns, as string
		groups              []string
		timeout             time.Duration
		insecure            bool
	}{
		{"the current context", []string{"list"}, "https://a.example:6443", "token-a", "team-a", "", nil, 30 * time.Second, false},
		{"--context, after the command", []string{"list", "--context", "b"}, "https://b.example:6443", "token-b", "team-b", "", nil, 30 * time.Second, false},
		{"-n before the command", []string{"-n", "x", "why", "m"}, "https://a.example:6443", "token-a", "x", "", nil, 30 * time.Second, false},
		{"--namespace after the name", []string{"why", "m", "--namespace=y"}, "https://a.example:6443", "token-a", "y", "", nil, 30 * time.Second, false},
		{"--cluster and --user", []string{"list", "--cluster", "b", "--user", "b"}, "https://b.example:6443", "token-b", "team-a", "", nil, 30 * time.Second, false},
		{"impersonation", []string{"list", "--as", "alice", "--as-group", "ops", "--as-group", "sre"}, "https://a.example:6443", "token-a", "team-a", "alice", []string{"ops", "sre"}, 30 * time.Second, false},
		{"--server, --token, --insecure-skip-tls-verify", []string{"list", "--server", "https://c.example", "--token", "t", "--insecure-skip-tls-verify"}, "https://c.example", "t", "team-a", "", nil, 30 * time.Second, true},
		{"--request-timeout", []string{"list", "--request-timeout", "2m"}, "https://a.example:6443", "token-a", "team-a", "", nil, 2 * time.Minute, false},
		{"--request-timeout in seconds", []string{"list", "--request-timeout=5"}, "https://a.example:6443", "token-a", "team-a", "", nil, 5 * time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got clients
			connect := func(f *genericclioptions.ConfigFlags) (clients, error) {
				cfg, err := f.ToRESTConfig()
				if err != nil {
					return clients{}, err
				}
				if cfg.Host != c.host || cfg.BearerToken != c.token || cfg.Impersonate.UserName != c.as ||
					strings.Join(cfg.Impersonate.Groups, ",") != strings.Join(c.groups, ",") || cfg.Timeout != c.timeout || cfg.Insecure != c.insecure {
					t.Errorf("config: host %s token %s as %q groups %q timeout %v insecure %v", cfg.Host, cfg.BearerToken,
						cfg.Impersonate.UserName, cfg.Impersonate.Groups, cfg.Timeout, cfg.Insecure)
				}
				if got, err = connectFlags(f); err != nil {
					return clients{}, err
				}
				return failing(got.namespace), nil
			}
			s, _, _ := streams()
			args := append(c.args, "--kubeconfig="+path)
			// The servers do not exist: the command fails reading, after the flags were taken.
			if err := run(context.Background(), args, s, connect); err == nil || !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("error %v, want the failing read's", err)
			}
			if got.namespace != c.ns {
				t.Errorf("namespace %q, want %q", got.namespace, c.ns)
			}
		})
	}
}

// failing are clients whose every call fails: the flags' tests stop at the first read.
func failing(ns string) clients {
	kube := kubefake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	fail := func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, errors.New("unreachable") }
	kube.PrependReactor("*", "*", fail)
	dyn.PrependReactor("*", "*", fail)
	return clients{kube: kube, dyn: dyn, namespace: ns}
}

// TestSessionBound: --request-timeout bounds the whole command too (30 s when not given), as
// the walk's dozen reads would otherwise add up; 0 is no bound, as for kubectl.
func TestSessionBound(t *testing.T) {
	for _, c := range []struct {
		flag string
		want time.Duration
	}{{"", 30 * time.Second}, {"2m", 2 * time.Minute}, {"7", 7 * time.Second}, {"0", 0}} {
		f := genericclioptions.NewConfigFlags(true)
		s, _, _ := streams()
		newRootCommand(s, f, nil) // sets the default
		if c.flag != "" {
			*f.Timeout = c.flag
		}
		a := &app{flags: f, connect: func(*genericclioptions.ConfigFlags) (clients, error) { return clients{}, nil }}
		_, ctx, cancel, err := a.session(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		d, ok := ctx.Deadline()
		cancel()
		if left := time.Until(d); ok != (c.want != 0) || ok && (left > c.want || left < c.want-10*time.Second) {
			t.Errorf("--request-timeout %q: deadline %v (%v), want %v", c.flag, ok, time.Until(d), c.want)
		}
	}
}
