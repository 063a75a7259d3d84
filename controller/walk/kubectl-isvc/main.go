// Command kubectl-isvc is the kubectl plugin for InferenceServices: `kubectl isvc why NAME`
// walks one model's layers (the runbook's walk on one screen), `kubectl isvc list` lists the
// models with their GPUs and queue. Install it on the PATH (make plugin; cp bin/kubectl-isvc
// bin/kubectl_complete-isvc ~/bin) and kubectl finds it, and completes it. It reads the cluster
// with kubectl's own flags (k8s.io/cli-runtime): kubeconfig, context, impersonation, timeouts.
//
// It is a module of its own: cli-runtime brings kustomize, which the operator never needs.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// version is set at build time (make plugin: -ldflags "-X main.version=...").
var version = "dev"

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := run(context.Background(), os.Args[1:], streams, connectFlags); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run executes one command line; connect turns kubectl's flags into clients (tests: fakes).
func run(ctx context.Context, args []string, streams genericiooptions.IOStreams, connect connectFunc) error {
	cmd := newRootCommand(streams, genericclioptions.NewConfigFlags(true), connect)
	cmd.SetArgs(args)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	return cmd.ExecuteContext(ctx)
}
