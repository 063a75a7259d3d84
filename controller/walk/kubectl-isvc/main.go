// Command kubectl-isvc is the kubectl plugin for InferenceServices: `kubectl isvc why NAME`
// walks one model's layers (the runbook's walk on one screen), `kubectl isvc list` lists the
// models with their GPUs and queue. Install it on the PATH (make plugin; cp bin/kubectl-isvc
// ~/bin) and kubectl finds it. It reads the cluster with the user's kubeconfig, like kubectl.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/inferenceservice-operator/controller/walk"
)

const usage = `Usage:
  kubectl isvc why NAME [-n NAMESPACE] [-o json]   walk one InferenceService's layers
  kubectl isvc list [-n NAMESPACE | -A] [-o json]  list the models: phase, reason, GPUs, queue

Flags:
`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, context, namespace, output string
	allNamespaces                          bool
	operatorNamespace, leaseName           string
	tail                                   int64
	timeout                                time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlags(&o, stderr)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the usage is printed
	}
	if err != nil {
		return err
	}
	if o.output != "" && o.output != "json" {
		return fmt.Errorf("--output %q: only json is supported", o.output)
	}
	switch {
	case len(pos) == 0:
		fs.Usage()
		return errors.New("a command is required: why or list")
	case pos[0] == "why" && len(pos) != 2:
		return errors.New("usage: kubectl isvc why NAME")
	case pos[0] == "list" && len(pos) != 1:
		return errors.New("usage: kubectl isvc list [-n NAMESPACE | -A]")
	case pos[0] != "why" && pos[0] != "list":
		fs.Usage()
		return fmt.Errorf("unknown command %q: why or list", pos[0])
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return err
	}
	if o.namespace == "" {
		if o.namespace, _, err = cc.Namespace(); err != nil {
			return err
		}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	src := walk.Source{Kube: kube, Dyn: dyn, OperatorNamespace: o.operatorNamespace, LeaseName: o.leaseName, LogLines: o.tail, Now: time.Now}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	switch pos[0] {
	case "why":
		r, err := src.Why(ctx, o.namespace, pos[1])
		if err != nil {
			return err
		}
		if o.output == "json" {
			return writeJSON(stdout, r)
		}
		return walk.RenderWhy(stdout, r)
	case "list":
		ns := o.namespace
		if o.allNamespaces {
			ns = ""
		}
		rows, err := src.List(ctx, ns)
		if err != nil {
			return err
		}
		if o.output == "json" {
			return writeJSON(stdout, rows)
		}
		if len(rows) == 0 {
			fmt.Fprintln(stderr, "No InferenceServices found.")
			return nil
		}
		return walk.RenderList(stdout, rows, o.allNamespaces)
	}
	return nil
}

// newFlags declares kubectl's flags the plugin honours, and its own.
func newFlags(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kubectl-isvc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).")
	fs.StringVar(&o.context, "context", "", "The kubeconfig context to use.")
	fs.StringVar(&o.namespace, "namespace", "", "Namespace (default: the context's).")
	fs.StringVar(&o.namespace, "n", "", "Shorthand for --namespace.")
	fs.BoolVar(&o.allNamespaces, "all-namespaces", false, "list: every namespace.")
	fs.BoolVar(&o.allNamespaces, "A", false, "Shorthand for --all-namespaces.")
	fs.StringVar(&o.output, "output", "", "Output format: empty for the screen, json.")
	fs.StringVar(&o.output, "o", "", "Shorthand for --output.")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", "inferenceservice-system", "Namespace the operator runs in (its leader Lease and pods).")
	fs.StringVar(&o.leaseName, "leader-election-id", "inferenceservice-operator", "Name of the operator's leader Lease.")
	fs.Int64Var(&o.tail, "tail", 10, "why: lines of the crashed container's previous log.")
	fs.DurationVar(&o.timeout, "request-timeout", 30*time.Second, "Bound on the whole command's API calls.")
	return fs
}

// parseInterspersed parses flags before and after the positional arguments, as kubectl does
// (`kubectl isvc why NAME -n team-a`); the flag package alone stops at the first argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
