package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestKueueQueueChangeLetsOtherChangesLand: Kueue's Deployment webhook refuses a change of
// kueue.x-k8s.io/queue-name while the Deployment has ready pods. A serving model's queueName
// and image changed in one edit: the image rolls out at once (through the old queue), the
// queue change waits, and the isvc says so and how to move it (QueueChangeWaiting). Scaled to
// 0, the queue moves; scaled up again, the pods are admitted through the new queue.
func TestKueueQueueChangeLetsOtherChangesLand(t *testing.T) {
	startKueue(t)
	// Registered after Kueue's stop, so it runs before it: the suite's operator back.
	t.Cleanup(func() { restartWith(t) })
	restartWith(t) // discovers Kueue's Workloads, served now
	ns := env.Namespace(t)
	env.Kubectl(t, "label", "namespace", ns, operator.KueueNamespaceLabel+"=true")
	cq := "qc-" + ns
	t.Cleanup(func() {
		// The model's pods and Workloads go while Kueue still runs to lift their finalizers.
		ctx := testenv.Ctx(t, 2*time.Minute)
		_, _, _ = env.Cluster.Kubectl(ctx, "delete", "-n", ns, "isvc", "--all", "--wait=false")
		testenv.Eventually(t, 90*time.Second, "the model's pods and workloads gone", func() error {
			pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			wls, err := env.Dyn.Resource(workloadGVR).Namespace(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(pods.Items)+len(wls.Items) > 0 {
				return fmt.Errorf("%d pods, %d workloads left", len(pods.Items), len(wls.Items))
			}
			return nil
		})
		_, _, _ = env.Cluster.Kubectl(ctx, "delete", "--ignore-not-found", "clusterqueue/"+cq, "resourceflavor/"+cq)
	})
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: %[2]s}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: %[1]s
      resources:
      - {name: cpu, nominalQuota: "1000"}
      - {name: memory, nominalQuota: 10Ti}
      - {name: nvidia.com/gpu, nominalQuota: "8"}
---
apiVersion: v1
kind: LimitRange
metadata: {name: defaults}
spec:
  limits:
  - type: Container
    defaultRequest: {cpu: 500m, memory: 1Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q1}
spec: {clusterQueue: %[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q2}
spec: {clusterQueue: %[1]s}
---
apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: chat}
spec: {model: m, replicas: 2, gpusPerReplica: 1, queueName: q1}
`, cq, ns))
	env.WaitPhase(t, ns, "chat", crd.PhaseReady, 2*time.Minute)
	waitAdmitted(t, ns, "chat", "Admitted", "2 pods admitted by ClusterQueue "+cq)

	deployment := func() (image, queue string, ready int32, err error) {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "chat", metav1.GetOptions{})
		if err != nil {
			return "", "", 0, err
		}
		return d.Spec.Template.Spec.Containers[0].Image, d.Labels[reconcile.QueueLabel], d.Status.ReadyReplicas, nil
	}

	// One edit: a new queue and a new image. The image lands; the queue waits, and says why.
	const image = "vllm/vllm-openai:v0.11.1"
	patchISVC(t, ns, "chat", `{"spec":{"queueName":"q2","image":"`+image+`"}}`)
	testenv.Eventually(t, time.Minute, "the new image in the Deployment, its queue still q1", func() error {
		img, q, _, err := deployment()
		if err != nil {
			return err
		}
		if img != image || q != "q1" {
			i, _ := env.ISVC(ns, "chat")
			return fmt.Errorf("Deployment image %s queue %s; isvc %s %s: %s", img, q, i.Status.Phase, i.Status.Reason, readyMessage(i))
		}
		return nil
	})
	i := waitReason(t, ns, "chat", reconcile.ReasonQueueChangeWaiting, 2*time.Minute)
	c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionProgressing)
	if c == nil || !strings.Contains(c.Message, "q2") || !strings.Contains(c.Message, "replicas: 0") {
		t.Fatalf("Progressing does not say how the queue moves: %+v", c)
	}
	t.Logf("the queue change waiting: %s %s: %s", i.Status.Phase, i.Status.Reason, c.Message)
	if i.Status.ReadyReplicas != 2 {
		t.Errorf("the model stopped serving: %d ready", i.Status.ReadyReplicas)
	}

	// The transition: scale to 0; the queue moves once no pod is ready; scale up through q2.
	patchISVC(t, ns, "chat", `{"spec":{"replicas":0}}`)
	testenv.Eventually(t, 2*time.Minute, "the Deployment in q2 at 0", func() error {
		_, q, ready, err := deployment()
		if err != nil {
			return err
		}
		if q != "q2" || ready != 0 {
			return fmt.Errorf("queue %s, %d ready", q, ready)
		}
		return nil
	})
	scaleToReadyPods(t, ns, "chat", 2, "in q2, on the new image", func(p corev1.Pod) error {
		if q := p.Labels[reconcile.QueueLabel]; q != "q2" || p.Spec.Containers[0].Image != image {
			return fmt.Errorf("queue %q image %s", q, p.Spec.Containers[0].Image)
		}
		return nil
	})
	env.WaitPhase(t, ns, "chat", crd.PhaseReady, time.Minute)
	waitAdmitted(t, ns, "chat", "Admitted", "2 pods admitted by ClusterQueue "+cq)

	// Out of Kueue: its webhook refuses removing the label, so the isvc says to delete the
	// Deployment at 0, once its pods are gone; the operator creates it anew without a queue, and
	// its pods are not gated.
	old, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "chat", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "patch", "isvc", "-n", ns, "chat", "--type=json", "-p", `[{"op":"remove","path":"/spec/queueName"},{"op":"replace","path":"/spec/replicas","value":0}]`)
	i = waitReason(t, ns, "chat", reconcile.ReasonQueueChangeWaiting, time.Minute)
	if c := meta.FindStatusCondition(i.Status.Conditions, crd.ConditionProgressing); c == nil || !strings.Contains(c.Message, "kubectl delete deployment chat -n "+ns) {
		t.Fatalf("Progressing does not say how to leave Kueue: %+v", c)
	}
	testenv.Eventually(t, 2*time.Minute, "the model's pods gone", func() error {
		_, _, ready, err := deployment()
		if err != nil {
			return err
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kinds.InstanceLabel + "=chat"})
		if err != nil {
			return err
		}
		if ready != 0 || len(pods.Items) != 0 {
			return fmt.Errorf("%d ready, %d pods", ready, len(pods.Items))
		}
		return nil
	})
	env.Kubectl(t, "delete", "deployment", "chat", "-n", ns)
	testenv.Eventually(t, time.Minute, "a new Deployment without a queue", func() error {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "chat", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.UID == old.UID || d.Labels[reconcile.QueueLabel] != "" {
			return fmt.Errorf("Deployment uid %s (old %s), queue %q", d.UID, old.UID, d.Labels[reconcile.QueueLabel])
		}
		return nil
	})
	scaleToReadyPods(t, ns, "chat", 2, "outside Kueue", func(p corev1.Pod) error {
		if q, ok := p.Labels[reconcile.QueueLabel]; ok {
			return fmt.Errorf("in queue %q", q)
		}
		return nil
	})
}

// scaleToReadyPods patches the isvc's replicas to n and waits for n ready pods of it, each
// passing check (what names what check wants).
func scaleToReadyPods(t *testing.T, ns, name string, n int, what string, check func(corev1.Pod) error) {
	t.Helper()
	patchISVC(t, ns, name, fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d ready pods of %s, %s", n, name, what), func() error {
		pods, err := readyModelPods(t, ns, name)
		if err != nil {
			return err
		}
		if len(pods) != n {
			return fmt.Errorf("%d ready pods", len(pods))
		}
		for _, p := range pods {
			if err := check(p); err != nil {
				return fmt.Errorf("pod %s: %w", p.Name, err)
			}
		}
		return nil
	})
}
