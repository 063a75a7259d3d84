package reconcile

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/example/inferenceservice-operator/crd"
)

// TestMain checks, after every test of the package has run, that nothing wrote through the
// parts every desired Deployment shares (template.go, resources.go, children.go): a write
// there would change every model's Deployment at once.
func TestMain(m *testing.M) {
	type parts struct {
		Health          *corev1.HTTPGetAction
		Readiness, Live *corev1.Probe
		Ports           []corev1.ContainerPort
		Shm             *corev1.EmptyDirVolumeSource
		Env             []corev1.EnvVar
		Command         []string
		APIVersion      string
		Drain           *corev1.Lifecycle
	}
	snapshot := func() parts {
		return parts{health.DeepCopy(), readinessProbe.DeepCopy(), livenessProbe.DeepCopy(),
			slices.Clone(serverPorts), shmSource.DeepCopy(), []corev1.EnvVar{*runtimeLoRA.DeepCopy(), *cacheEnv.DeepCopy()}, slices.Clone(server.Command), apiVersion, drain.DeepCopy()}
	}
	// Every engine's container parts (engine.go), likewise.
	engines := func() map[string]serverParts {
		out := map[string]serverParts{}
		for name, p := range enginesParts {
			c := serverParts{server: p.server, health: p.health.DeepCopy(), readiness: p.readiness.DeepCopy(), liveness: p.liveness.DeepCopy(),
				ports: slices.Clone(p.ports)}
			c.server.Command = slices.Clone(p.server.Command)
			if p.runtimeAdapters != nil {
				c.runtimeAdapters = p.runtimeAdapters.DeepCopy()
			}
			out[name] = c
		}
		return out
	}
	before, beforeEngines := snapshot(), engines()
	code := m.Run()
	if after := snapshot(); !equality.Semantic.DeepEqual(before, after) || len(serverPorts) != 1 {
		fmt.Fprintf(os.Stderr, "shared parts of the desired children were written to:\nbefore %+v\nafter  %+v\n", before, after)
		code = 1
	}
	if after := engines(); !reflect.DeepEqual(beforeEngines, after) || len(after) < 2 {
		fmt.Fprintf(os.Stderr, "an engine's shared container parts were written to:\nbefore %+v\nafter  %+v\n", beforeEngines, after)
		code = 1
	}
	for k, r := range sharedResources.m {
		spec := &crd.InferenceServiceSpec{GPUsPerReplica: &k.gpus, Resources: &crd.Resources{GPUResourceName: string(k.gpu)}}
		if want := buildResources(spec); !equality.Semantic.DeepEqual(r, want) {
			fmt.Fprintf(os.Stderr, "shared resources of %v were written to: %+v, want %+v\n", k, r, want)
			code = 1
		}
	}
	os.Exit(code)
}
