// Command kubectl is the kubectl CLI built from the k8s.io/kubectl module this folder's go.mod
// pins, for the tests: kubectl's own main lives in k8s.io/kubernetes (cmd/kubectl/kubectl.go),
// whose module is the whole tree, so this is that main, line for line, over the library. The
// version it reports is stamped by build.sh's ldflags, as upstream's hack/lib/version.sh does.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// The client auth plugins, as upstream's kubectl registers them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// The verbosity is read before the command is built, as upstream does: klog is used while
	// kubectl builds its commands (plugins, .kuberc), before cobra parses -v.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
