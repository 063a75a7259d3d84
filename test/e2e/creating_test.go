package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/crd"
)

// TestContainerCreatingForLong is the runbook's "ContainerCreating for long" row, read from the
// pods' own Events as a human would (`kubectl describe pod`): on nodes that pull slowly, a model
// whose image is still being pulled says PullingImage (Progressing, not a failure) until it
// serves; a model whose weights volume will not mount says VolumeMountFailed (Failed) with the
// kubelet's message, and serves once the volume mounts. The suite's operator reads the Events
// of a pod still being created 5 s after it was scheduled (--creating-evidence-after).
func TestContainerCreatingForLong(t *testing.T) {
	ns := modelNamespace(t)
	w := useWebhookCRD(t)

	// A slow pull: every node takes 25 s for an image it has not pulled yet.
	env.Kubectl(t, "annotate", "nodes", "--all", "--overwrite", "kubelet.fake/pull-seconds=25")
	t.Cleanup(func() { env.Kubectl(t, "annotate", "nodes", "--all", "kubelet.fake/pull-seconds-") })
	// A volume that will not mount: the weights cache's PV fails as an unreachable NFS server does.
	pv := "weights-" + ns
	t.Cleanup(func() { env.Kubectl(t, "delete", "pv", pv, "--wait=false") })
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %[1]s
  annotations: {kubelet.fake/mount-error: "mount failed: exit status 32\nMounting command: mount\nOutput: mount.nfs: Connection timed out"}
spec:
  capacity: {storage: 50Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /tmp/%[1]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: weights}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  volumeName: %[1]s
  resources: {requests: {storage: 20Gi}}
`, pv))
	f := filepath.Join(t.TempDir(), "isvc.yaml")
	image := "vllm/vllm-openai:v0.11.0-" + ns // no node holds it yet
	if err := os.WriteFile(f, []byte(fmt.Sprintf(`apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: pulling}
spec: {baseModel: m, replicas: 1, image: %q}
---
apiVersion: ai.example.com/v1beta1
kind: InferenceService
metadata: {name: mounting}
spec:
  baseModel: m
  replicas: 1
  cache: {claimName: weights}
`, image)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	env.Kubectl(t, w.cache, "apply", "-n", ns, "-f", f)

	i := waitReason(t, ns, "pulling", "PullingImage", 90*time.Second)
	t.Logf("PullingImage %s after the create:\n%s\n%s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "pulling"), readyMessage(i))
	if i.Status.Phase != crd.PhaseProgressing || !strings.Contains(readyMessage(i), fmt.Sprintf("Pulling image %q since", image)) {
		t.Fatalf("phase %s, message %q", i.Status.Phase, readyMessage(i))
	}
	i = waitReason(t, ns, "mounting", "VolumeMountFailed", 90*time.Second)
	t.Logf("VolumeMountFailed %s after the create:\n%s\n%s", time.Since(start).Round(100*time.Millisecond), getRow(t, ns, "mounting"), readyMessage(i))
	if i.Status.Phase != crd.PhaseFailed || !strings.Contains(readyMessage(i), fmt.Sprintf(`FailedMount: MountVolume.SetUp failed for volume %q : mount failed: exit status 32`, pv)) {
		t.Fatalf("phase %s, message %q", i.Status.Phase, readyMessage(i))
	}

	env.WaitPhase(t, ns, "pulling", crd.PhaseReady, 2*time.Minute)
	t.Logf("pulling: Ready %s after the create (a 25 s pull); history %v", time.Since(start).Round(100*time.Millisecond), historyOf(t, ns, "pulling"))
	fixed := time.Now()
	env.Kubectl(t, "annotate", "pv", pv, "kubelet.fake/mount-error-")
	env.WaitPhase(t, ns, "mounting", crd.PhaseReady, 2*time.Minute)
	t.Logf("mounting: Ready %s after the volume was fixed; history %v", time.Since(fixed).Round(100*time.Millisecond), historyOf(t, ns, "mounting"))
	// Written through v1beta1's status, read back through v1alpha1: the history survives both.
	if h := historyOf(t, ns, "mounting"); strings.Join(h, " ") != "Failed/VolumeMountFailed Ready/Available" {
		t.Fatalf("history %v", h)
	}
}
