// -o: the screens by default, the same data as a JSON or YAML document, list's wide columns.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/controller/walk"
)

type outputFormat string

const (
	outputScreen outputFormat = ""
	outputJSON   outputFormat = "json"
	outputYAML   outputFormat = "yaml"
	outputWide   outputFormat = "wide"
)

// parseOutput checks -o for a command; wide only where there are columns to add (list).
func parseOutput(o string, wide bool) (outputFormat, error) {
	switch f := outputFormat(o); f {
	case outputScreen, outputJSON, outputYAML:
		return f, nil
	case outputWide:
		if wide {
			return f, nil
		}
		return "", fmt.Errorf("--output wide: only list has columns to add; json or yaml")
	}
	if wide {
		return "", fmt.Errorf("--output %q: json, yaml or wide", o)
	}
	return "", fmt.Errorf("--output %q: json or yaml", o)
}

// rowList is list's -o json|yaml document, shaped as kubectl's List so what reads `kubectl
// get -o json` reads it (jq '.items[]'); its items are the rows, not API objects.
type rowList struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Items      []walk.Row `json:"items"`
}

// writeDocument encodes v (the walk's Report, a rowList, the versions) as JSON or YAML; the
// YAML is the JSON's, field names included.
func writeDocument(w io.Writer, f outputFormat, v any) error {
	if f == outputYAML {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// versions is `version -o json|yaml`, in kubectl version's field names.
type versions struct {
	ClientVersion string           `json:"clientVersion"`
	ServerVersion *apiversion.Info `json:"serverVersion,omitempty"`
}

// version prints the plugin's version, then the server's unless clientOnly; an unreachable
// server fails the command after the client's line, as kubectl version does.
func (a *app) version(ctx context.Context, clientOnly bool) error {
	format, err := parseOutput(a.opts.output, false)
	if err != nil {
		return err
	}
	v := versions{ClientVersion: version}
	var serverErr error
	if !clientOnly {
		c, ctx, cancel, err := a.session(ctx)
		if err != nil {
			serverErr = err
		} else {
			defer cancel()
			v.ServerVersion, serverErr = discovery.ToDiscoveryInterfaceWithContext(c.kube.Discovery()).ServerVersionWithContext(ctx)
		}
	}
	if format != outputScreen {
		if err := writeDocument(a.streams.Out, format, v); err != nil {
			return err
		}
		return serverErr
	}
	fmt.Fprintf(a.streams.Out, "Client Version: %s\n", v.ClientVersion)
	if v.ServerVersion != nil {
		fmt.Fprintf(a.streams.Out, "Server Version: %s\n", v.ServerVersion.GitVersion)
	}
	return serverErr
}
