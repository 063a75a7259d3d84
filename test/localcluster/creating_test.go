package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// ckStart runs the fake kubelet's informers and pod workers against a fake API with two
// fake nodes, node 0 carrying the annotations given.
func ckStart(t *testing.T, cfg kubeletConfig, node0 map[string]string) (*fake.Clientset, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	nc := nodeConfig{count: 2, cpu: resource.MustParse("32"), memory: resource.MustParse("256Gi"), gpus: 8, pods: 110}
	for i := 0; i < nc.count; i++ {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{fakeNodeLabel: "true"}}, Status: nc.nodeStatus(i, nil)}
		if i == 0 {
			n.Annotations = node0
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := newKubelet(client, cfg, nc.count, newIPAllocator(201))
	if err := k.run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		k.wg.Wait()
	})
	return client, ctx
}

func ckPod(t *testing.T, ctx context.Context, client *fake.Clientset, name, node, image, claim string) {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{{Name: "server", Image: image}},
		},
	}
	if claim != "" {
		pod.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/root/.cache/huggingface"}}
	}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ckEvents is "Type Reason message (count)" of the pod's events, one a line.
func ckEvents(ctx context.Context, client *fake.Clientset, pod string) string {
	list, err := client.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == pod {
			out = append(out, fmt.Sprintf("%s %s %s (%d)", e.Type, e.Reason, e.Message, e.Count))
		}
	}
	return strings.Join(out, "\n")
}

// ckState is "phase waiting-reason/running podIP ready-to-start" of the pod.
func ckState(ctx context.Context, client *fake.Clientset, name string) string {
	p, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	state := "none"
	if len(p.Status.ContainerStatuses) == 1 {
		s := p.Status.ContainerStatuses[0].State
		switch {
		case s.Waiting != nil:
			state = "waiting:" + s.Waiting.Reason
		case s.Running != nil:
			state = "running"
		}
	}
	sandbox := "?"
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReadyToStartContainers {
			sandbox = string(c.Status)
		}
	}
	return fmt.Sprintf("%s %s ip=%s sandbox=%s", p.Status.Phase, state, p.Status.PodIP, sandbox)
}

// TestSlowPull: on a node annotated kubelet.fake/pull-seconds an image it has not pulled yet
// takes that long: Pulling, the container waiting ContainerCreating, then the kubelet's
// Successfully pulled line and the start. The next pod with that image finds it present; a
// node without the annotation pulls at once.
func TestSlowPull(t *testing.T) {
	client, ctx := ckStart(t, kubeletConfig{crashBackoffInitial: time.Second, crashBackoffMax: 2 * time.Second}, map[string]string{pullSecondsAnnotation: "2"})
	const img = "registry.example/llm-server:v1"
	ckPod(t, ctx, client, "first", nodeName(0), img, "")
	sawCreating := false
	pollUntil(t, "pulling: waiting ContainerCreating", func() (bool, string) {
		s := ckState(ctx, client, "first")
		sawCreating = s == "Pending waiting:ContainerCreating ip=127.201.0.1 sandbox=True"
		return sawCreating || strings.Contains(s, "running"), s
	})
	if !sawCreating {
		t.Fatalf("no ContainerCreating while pulling: %s\n%s", ckState(ctx, client, "first"), ckEvents(ctx, client, "first"))
	}
	// The recorder delivers events on its own goroutine: the Pulling line may land just after the
	// state, so wait for it, and see nothing of the pull's end beside it (the pull takes 2s).
	var ev string
	pollUntil(t, "the Pulling event", func() (bool, string) {
		ev = ckEvents(ctx, client, "first")
		return strings.Contains(ev, `Normal Pulling Pulling image "`+img+`"`), ev
	})
	if strings.Contains(ev, "Pulled") || strings.Contains(ev, "Started") {
		t.Fatalf("events while pulling:\n%s", ev)
	}
	pollUntil(t, "pulled and running", func() (bool, string) {
		ev := ckEvents(ctx, client, "first")
		return strings.Contains(ckState(ctx, client, "first"), "running") &&
			strings.Contains(ev, `Normal Pulled Successfully pulled image "`+img+`" in 2s (2s including waiting). Image size: `) &&
			strings.Contains(ev, "Normal Started Container started"), ckState(ctx, client, "first") + "\n" + ev
	})
	t.Logf("events:\n%s", ckEvents(ctx, client, "first"))

	ckPod(t, ctx, client, "second", nodeName(0), img, "")
	ckPod(t, ctx, client, "elsewhere", nodeName(1), "registry.example/other:v2", "")
	for _, p := range []struct{ name, img string }{{"second", img}, {"elsewhere", "registry.example/other:v2"}} {
		pollUntil(t, p.name+" running with its image present", func() (bool, string) {
			ev := ckEvents(ctx, client, p.name)
			return strings.Contains(ckState(ctx, client, p.name), "running") &&
				strings.Contains(ev, `Normal Pulled Container image "`+p.img+`" already present on machine`), ckState(ctx, client, p.name) + "\n" + ev
		})
		if ev := ckEvents(ctx, client, p.name); strings.Contains(ev, "Pulling") {
			t.Fatalf("%s pulled again:\n%s", p.name, ev)
		}
	}
}

// TestMountFailure: a pod whose claim is bound to a PV annotated kubelet.fake/mount-error never
// starts: no sandbox, its container waiting ContainerCreating, FailedMount warnings with the
// kubelet's wording repeated as it retries. Removing the annotation mounts it at the next
// retry and the pod starts. Past the mount timeout, the pod's sync warns that it gave up.
func TestMountFailure(t *testing.T) {
	client, ctx := ckStart(t, kubeletConfig{crashBackoffInitial: time.Second, crashBackoffMax: 2 * time.Second, mountTimeout: 2 * time.Second}, nil)
	const msg = "mount failed: exit status 32\nMounting command: mount\nOutput: mount.nfs: Connection refused"
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "weights-pv", Annotations: map[string]string{mountErrorAnnotation: msg}},
		Spec: v1.PersistentVolumeSpec{
			StorageClassName:       "manual",
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/weights"}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "weights", Namespace: "ns"},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: "weights-pv"},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ckPod(t, ctx, client, "mounting", nodeName(0), "registry.example/llm-server:v1", "weights")
	want := `Warning FailedMount MountVolume.SetUp failed for volume "weights-pv" : ` + msg
	pollUntil(t, "FailedMount repeated, ContainerCreating, no sandbox", func() (bool, string) {
		ev := ckEvents(ctx, client, "mounting")
		s := ckState(ctx, client, "mounting")
		return s == "Pending waiting:ContainerCreating ip= sandbox=False" && strings.Contains(ev, want+" (3)"), s + "\n" + ev
	})
	if ev := ckEvents(ctx, client, "mounting"); strings.Contains(ev, "Started") || strings.Contains(ev, "Pulled") {
		t.Fatalf("a container started on an unmounted volume:\n%s", ev)
	}
	const timedOut = "Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[cache], unattached volumes=[], failed to process volumes=[]: context deadline exceeded"
	pollUntil(t, "the pod's sync gave up waiting", func() (bool, string) {
		ev := ckEvents(ctx, client, "mounting")
		return strings.Contains(ev, timedOut), ev
	})
	t.Logf("events:\n%s", ckEvents(ctx, client, "mounting"))

	pv, _ = client.CoreV1().PersistentVolumes().Get(ctx, "weights-pv", metav1.GetOptions{})
	delete(pv.Annotations, mountErrorAnnotation)
	if _, err := client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "mounted and running", func() (bool, string) {
		s := ckState(ctx, client, "mounting")
		return strings.HasPrefix(s, "Running running ip=127.201.") && strings.HasSuffix(s, "sandbox=True"), s + "\n" + ckEvents(ctx, client, "mounting")
	})
}
