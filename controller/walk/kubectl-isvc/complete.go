// Shell completion: cobra's `completion bash|zsh|fish|powershell` for kubectl-isvc itself, and
// its hidden `__complete`, which kubectl (1.26 and later) reaches through kubectl_complete-isvc
// on the PATH to complete `kubectl isvc ...`. Names come from the cluster, ours only.

package main

import (
	"context"
	"sort"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
)

// completeTimeout keeps a shell's tab from hanging on an unreachable cluster.
const completeTimeout = 5 * time.Second

// completeNames offers the InferenceServices (ai.example.com) of the namespace for `why NAME`.
func (a *app) completeNames(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := a.connect(a.flags)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	l, err := c.dyn.Resource(crd.Resource).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, i := range l.Items {
		names = append(names, i.GetName())
	}
	sort.Strings(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// registerFlagCompletion completes -o's formats, -n's namespaces and --context's contexts.
func registerFlagCompletion(root *cobra.Command, a *app) {
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml", "wide"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		c, err := a.connect(a.flags)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
		defer cancel()
		l, err := c.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, n := range l.Items {
			names = append(names, n.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		cfg, err := a.flags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for n := range cfg.Contexts {
			names = append(names, n)
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}
