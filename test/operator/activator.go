package operator

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// ActivatorImage is the image the local cluster's kubelet runs the activator binary for
// (--exec-image): the manifests' Deployment, its image renamed to it, runs as a real process on
// its pod IP with its ServiceAccount's token.
const ActivatorImage = "localhost/inferenceservice-activator"

// BuildActivator compiles the activator (the image's third binary) into dir.
func BuildActivator(ctx context.Context, dir string) (string, error) {
	return build(ctx, filepath.Join(dir, "inferenceservice-activator"), "./controller/activator/cmd")
}

// InstallActivator applies manifests/activator as `kubectl apply -k` would, with the image
// renamed to ActivatorImage, replicas replicas and args added to the container's, and waits for
// its Deployment to be available. Files go in dir.
func InstallActivator(ctx context.Context, c *cluster.Cluster, dir string, replicas int, args ...string) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	out, _, err := c.Kubectl(ctx, "kustomize", filepath.Join(root, "manifests", "activator"))
	if err != nil {
		return err
	}
	var docs [][]byte
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "Deployment" {
			if err := unstructured.SetNestedField(u.Object, int64(replicas), "spec", "replicas"); err != nil {
				return err
			}
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if len(cs) != 1 {
				return fmt.Errorf("activator Deployment: %d containers, want 1", len(cs))
			}
			ctr := cs[0].(map[string]any)
			ctr["image"] = ActivatorImage + ":test"
			have, _, _ := unstructured.NestedStringSlice(ctr, "args")
			as := make([]any, 0, len(have)+len(args))
			for _, a := range append(have, args...) {
				as = append(as, a)
			}
			ctr["args"] = as
			if err := unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers"); err != nil {
				return err
			}
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		docs = append(docs, b)
	}
	f := filepath.Join(dir, "activator.yaml")
	if err := os.WriteFile(f, bytes.Join(docs, []byte("---\n")), 0o600); err != nil {
		return err
	}
	if _, _, err := c.Kubectl(ctx, "apply", "-f", f); err != nil {
		return err
	}
	_, _, err = c.Kubectl(ctx, "-n", "inferenceservice-system", "rollout", "status", "deployment/inferenceservice-activator", "--timeout=120s")
	return err
}
