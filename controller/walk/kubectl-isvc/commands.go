// The commands: why, list and version, on kubectl's own flags; the clients they read through.

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/walk"
)

// clients are what the commands read through, built from kubectl's flags.
type clients struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// namespace is -n's, else the kubeconfig context's, else "default".
	namespace string
}

// connectFunc builds the clients from kubectl's flags; the tests hand in fakes.
type connectFunc func(*genericclioptions.ConfigFlags) (clients, error)

// connectFlags is kubectl's own way: the kubeconfig with every override the flags carry
// (--context, --cluster, --user, --as, --token, --server, --request-timeout, ...). No
// discovery and no RESTMapper: every read names its group (crd.Resource, ai.example.com), so a
// cluster that also serves KServe's InferenceService (short name isvc too) is never asked for it.
func connectFlags(f *genericclioptions.ConfigFlags) (clients, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return clients{}, err
	}
	cfg.UserAgent = "kubectl-isvc/" + version
	ns, _, err := f.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return clients{}, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	return clients{kube: kube, dyn: dyn, namespace: ns}, nil
}

// options are the plugin's own flags, beside kubectl's.
type options struct {
	output                       string
	allNamespaces                bool
	operatorNamespace, leaseName string
	tail                         int64
}

// app is one command line's state: kubectl's flags, the plugin's, and where to write.
type app struct {
	flags   *genericclioptions.ConfigFlags
	opts    options
	streams genericiooptions.IOStreams
	connect connectFunc
}

// defaultTimeout bounds a command whose --request-timeout was not given: the walk's dozen reads
// should not hang on an unreachable server.
const defaultTimeout = "30s"

func newRootCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags, connect connectFunc) *cobra.Command {
	a := &app{flags: flags, streams: streams, connect: connect}
	a.flags.Timeout = ptr.To(defaultTimeout)
	root := &cobra.Command{
		Use:   "kubectl-isvc",
		Short: "Why an InferenceService (ai.example.com) is not serving, and every model's GPUs and queue",
		// kubectl's plugin convention: help and errors say `kubectl isvc`.
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl isvc"},
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q: why, list or version", args[0])
			}
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return errors.New("a command is required: why or list")
		},
	}
	a.flags.AddFlags(root.PersistentFlags())
	pf := root.PersistentFlags()
	pf.Lookup("request-timeout").Usage = "Bound on each server request and on the whole command, e.g. 30s, 2m; 0 for none."
	pf.StringVarP(&a.opts.output, "output", "o", "", "Output format: json or yaml; wide adds list's columns.")
	pf.StringVar(&a.opts.operatorNamespace, "operator-namespace", "inferenceservice-system", "Namespace the operator runs in (its leader Lease and pods).")
	pf.StringVar(&a.opts.leaseName, "leader-election-id", "inferenceservice-operator", "Name of the operator's leader Lease.")
	registerFlagCompletion(root, a)

	why := &cobra.Command{
		Use:               "why NAME",
		Short:             "Walk one InferenceService's layers: the first that does not add up, its causes, where to look next",
		Args:              usageArgs(1, "usage: kubectl isvc why NAME"),
		ValidArgsFunction: a.completeNames,
		RunE:              func(cmd *cobra.Command, args []string) error { return a.why(cmd.Context(), args[0]) },
	}
	why.Flags().Int64Var(&a.opts.tail, "tail", 10, "Lines of the crashed container's previous log.")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the models: phase, reason, ready replicas, GPUs and queue",
		Args:  usageArgs(0, "usage: kubectl isvc list [-n NAMESPACE | -A]"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return a.list(cmd.Context()) },
	}
	list.Flags().BoolVarP(&a.opts.allNamespaces, "all-namespaces", "A", false, "List the models of every namespace.")

	var clientOnly bool
	ver := &cobra.Command{
		Use:   "version",
		Short: "The plugin's version and the server's",
		Args:  usageArgs(0, "usage: kubectl isvc version [--client]"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return a.version(cmd.Context(), clientOnly) },
	}
	ver.Flags().BoolVar(&clientOnly, "client", false, "The plugin's version only; no server is asked.")

	root.AddCommand(why, list, ver)
	return root
}

// usageArgs refuses any other count of arguments with the line that says what to type.
func usageArgs(n int, usage string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return errors.New(usage)
		}
		return nil
	}
}

// session connects and bounds the command's reads by --request-timeout, as the old --timeout
// bounded them: each request (client-go) and the whole command (here).
func (a *app) session(ctx context.Context) (clients, context.Context, context.CancelFunc, error) {
	d, err := commandTimeout(*a.flags.Timeout)
	if err != nil {
		return clients{}, nil, nil, err
	}
	c, err := a.connect(a.flags)
	if err != nil {
		return clients{}, nil, nil, err
	}
	if d == 0 {
		ctx, cancel := context.WithCancel(ctx)
		return c, ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return c, ctx, cancel, nil
}

// commandTimeout reads --request-timeout as client-go does: a bare integer is seconds, 0 none.
func commandTimeout(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--request-timeout %q: a duration such as 30s, or 0 for none", s)
	}
	return d, nil
}

func (a *app) source(c clients) walk.Source {
	return walk.Source{Kube: c.kube, Dyn: c.dyn, OperatorNamespace: a.opts.operatorNamespace, LeaseName: a.opts.leaseName,
		LogLines: a.opts.tail, Now: time.Now}
}

func (a *app) why(ctx context.Context, name string) error {
	format, err := parseOutput(a.opts.output, false)
	if err != nil {
		return err
	}
	c, ctx, cancel, err := a.session(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	r, err := a.source(c).Why(ctx, c.namespace, name)
	if err != nil {
		return err
	}
	if format == outputScreen {
		return walk.RenderWhy(a.streams.Out, r)
	}
	return writeDocument(a.streams.Out, format, r)
}

func (a *app) list(ctx context.Context) error {
	format, err := parseOutput(a.opts.output, true)
	if err != nil {
		return err
	}
	c, ctx, cancel, err := a.session(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	ns := c.namespace
	if a.opts.allNamespaces {
		ns = ""
	}
	rows, err := a.source(c).List(ctx, ns)
	if err != nil {
		return err
	}
	switch format {
	case outputJSON, outputYAML:
		return writeDocument(a.streams.Out, format, rowList{APIVersion: "v1", Kind: "List", Items: rows})
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.streams.ErrOut, "No InferenceServices found.")
		return nil
	}
	if format == outputWide {
		return walk.RenderListWide(a.streams.Out, rows, a.opts.allNamespaces)
	}
	return walk.RenderList(a.streams.Out, rows, a.opts.allNamespaces)
}
