// Pods stuck in ContainerCreating: a slow image pull (kubelet.fake/pull-seconds on a node) and
// a volume that does not mount (kubelet.fake/mount-error on a PersistentVolume), as kubectl
// shows them and with the kubelet's own events.

package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// podEvents lists "Type Reason message (count)" of the namespace's events about pod.
func podEvents(t *testing.T, ns, pod string) string {
	t.Helper()
	out, _, _ := c.Kubectl(context.Background(), "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+pod,
		"-o", `jsonpath={range .items[*]}{.type} {.reason} {.message} ({.count}){"\n"}{end}`)
	return out
}

// waitingReason is phase/state of the pod's first container: its waiting reason, or running.
func waitingReason(t *testing.T, ns, pod string) string {
	return jsonpath(t, ns, "pod/"+pod, `{.status.phase}/{.status.containerStatuses[0].state.waiting.reason}{.status.containerStatuses[0].state.running.startedAt}`)
}

func pinnedPod(name, node, image, volumes string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  containers:
  - name: server
    image: %s
%s---
`, name, node, image, volumes)
}

// TestSlowImagePull: on a node that pulls slowly, a pod with an image new to the node waits
// ContainerCreating with a Pulling event and no Pulled one, then starts with the kubelet's
// "Successfully pulled image ... in 5s" line; the next pod with that image on the node finds it
// already present.
func TestSlowImagePull(t *testing.T) {
	ns := namespace(t)
	const node = "fake-node-3"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.Kubectl(ctx, "annotate", "node", node, "kubelet.fake/pull-seconds-")
	})
	kubectl(t, "annotate", "node", node, "kubelet.fake/pull-seconds=5", "--overwrite")
	// An image no earlier test pulled on the node.
	img := fmt.Sprintf("registry.example/llm-server:pull-%d", time.Now().UnixNano())
	created := time.Now()
	apply(t, ns, pinnedPod("first", node, img, ""))
	eventually(t, 30*time.Second, func() (bool, string) {
		s := waitingReason(t, ns, "first")
		return s == "Pending/ContainerCreating", s + "\n" + podEvents(t, ns, "first")
	})
	ev := podEvents(t, ns, "first")
	if !strings.Contains(ev, `Normal Pulling Pulling image "`+img+`"`) || strings.Contains(ev, "Pulled") || strings.Contains(ev, "Started") {
		t.Fatalf("events while pulling:\n%s", ev)
	}
	t.Logf("while pulling (%v after the create):\n%s%s", time.Since(created).Round(100*time.Millisecond), kubectl(t, "get", "pod", "first", "-n", ns), ev)
	pulled := `Normal Pulled Successfully pulled image "` + img + `" in 5s (5s including waiting). Image size: 4212134 bytes. (1)`
	eventually(t, 30*time.Second, func() (bool, string) {
		s := waitingReason(t, ns, "first")
		ev := podEvents(t, ns, "first")
		return strings.HasPrefix(s, "Running/") && strings.Contains(ev, pulled), s + "\n" + ev
	})
	t.Logf("running %v after the create:\n%s", time.Since(created).Round(100*time.Millisecond), podEvents(t, ns, "first"))

	apply(t, ns, pinnedPod("second", node, img, ""))
	eventually(t, 30*time.Second, func() (bool, string) {
		s := waitingReason(t, ns, "second")
		ev := podEvents(t, ns, "second")
		return strings.HasPrefix(s, "Running/") && strings.Contains(ev, `Normal Pulled Container image "`+img+`" already present on machine`), s + "\n" + ev
	})
	if ev := podEvents(t, ns, "second"); strings.Contains(ev, "Pulling") {
		t.Fatalf("the node pulled an image it holds again:\n%s", ev)
	}
}

// TestVolumeMountFailure: a pod whose claim is bound to a PV that does not mount waits
// ContainerCreating without a sandbox (no pod IP), with the kubelet's FailedMount warnings
// counted up as it retries and, past the wait of the pod's sync, "Unable to attach or mount
// volumes"; once the PV is fixed the next retry mounts it and the pod runs.
func TestVolumeMountFailure(t *testing.T) {
	ns := namespace(t)
	pv := ns + "-weights"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.Kubectl(ctx, "delete", "pv", pv, "--wait=false")
	})
	const mountErr = "mount failed: exit status 32 Mounting command: mount Mounting arguments: -t nfs 127.0.0.1:/weights /var/lib/kubelet/pods/volumes/kubernetes.io~nfs/weights Output: mount.nfs: Connection refused"
	apply(t, ns, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
  annotations: {kubelet.fake/mount-error: %q}
spec:
  capacity: {storage: 50Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  claimRef: {namespace: %s, name: weights}
  hostPath: {path: /tmp/%s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: weights}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  resources: {requests: {storage: 20Gi}}
---
`, pv, mountErr, ns, pv))
	created := time.Now()
	apply(t, ns, pinnedPod("mounting", "fake-node-2", "registry.example/llm-server:v1", `    volumeMounts:
    - {name: cache, mountPath: /root/.cache/huggingface}
  volumes:
  - name: cache
    persistentVolumeClaim: {claimName: weights}
`))
	setUpFailed := `Warning FailedMount MountVolume.SetUp failed for volume "` + pv + `" : ` + mountErr
	eventually(t, 60*time.Second, func() (bool, string) {
		s := waitingReason(t, ns, "mounting") + " ip=" + jsonpath(t, ns, "pod/mounting", "{.status.podIP}")
		ev := podEvents(t, ns, "mounting")
		return s == "Pending/ContainerCreating ip=" && strings.Contains(ev, setUpFailed+" (3)"), s + "\n" + ev
	})
	t.Logf("%v after the create:\n%s%s", time.Since(created).Round(100*time.Millisecond), kubectl(t, "get", "pod", "mounting", "-n", ns), podEvents(t, ns, "mounting"))
	if sandbox := jsonpath(t, ns, "pod/mounting", `{.status.conditions[?(@.type=="PodReadyToStartContainers")].status}`); sandbox != "False" {
		t.Fatalf("PodReadyToStartContainers %q with its volume unmounted", sandbox)
	}
	const gaveUp = "Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[cache], unattached volumes=[], failed to process volumes=[]: context deadline exceeded (1)"
	eventually(t, 60*time.Second, func() (bool, string) {
		ev := podEvents(t, ns, "mounting")
		return strings.Contains(ev, gaveUp), ev
	})
	t.Logf("%v after the create:\n%s", time.Since(created).Round(100*time.Millisecond), podEvents(t, ns, "mounting"))
	if ev := podEvents(t, ns, "mounting"); strings.Contains(ev, "Started") || strings.Contains(ev, "Pulled") {
		t.Fatalf("a container started on an unmounted volume:\n%s", ev)
	}

	fixed := time.Now()
	kubectl(t, "annotate", "pv", pv, "kubelet.fake/mount-error-")
	eventually(t, 30*time.Second, func() (bool, string) {
		s := waitingReason(t, ns, "mounting") + " ip=" + jsonpath(t, ns, "pod/mounting", "{.status.podIP}")
		return strings.HasPrefix(s, "Running/") && !strings.HasSuffix(s, " ip="), s + "\n" + podEvents(t, ns, "mounting")
	})
	t.Logf("running %v after the fix", time.Since(fixed).Round(100*time.Millisecond))
}
