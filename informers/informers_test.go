package informers

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

func managed(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{ManagedByLabel: ManagedByValue, "ai.example.com/inferenceservice": name},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
}

func isvc(name, ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec":     map[string]any{"model": "m", "replicas": int64(1)},
	}}
	return u
}

// newSet builds caches over fake clients (unit scope only: the e2e suite runs them against a
// real API server) and waits for them to sync.
func newSet(t *testing.T, namespaces []string) *Set {
	t.Helper()
	kube := fake.NewSimpleClientset(
		&appsv1.Deployment{ObjectMeta: managed("a", "ns1")},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "unmanaged", Namespace: "ns1"}},
		&appsv1.Deployment{ObjectMeta: managed("b", "ns2")},
		&corev1.Pod{ObjectMeta: managed("a-pod", "ns1"), Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "vllm", Image: "x", Env: []corev1.EnvVar{{Name: "A", Value: "B"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{
				Name: "vllm", Image: "x", ImageID: "sha256:x", RestartCount: 3,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}},
		&appsv1.ReplicaSet{ObjectMeta: managed("a-rs", "ns1"), Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm"}}}}}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns1"}},
	)
	scheme := runtime.NewScheme()
	bad := isvc("bad", "ns1")
	bad.Object["spec"].(map[string]any)["replicas"] = "three"
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{crd.Resource: crd.Kind + "List"}, isvc("a", "ns1"), isvc("b", "ns2"), bad)
	s := New(kube, dyn, Options{Namespaces: namespaces})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	s.Start(ctx)
	if !s.WaitForCacheSync(ctx) {
		t.Fatal("caches did not sync")
	}
	return s
}

func TestScopedAndStripped(t *testing.T) {
	s := newSet(t, nil)
	d, ok, err := s.Deployment("ns1", "a")
	if err != nil || !ok {
		t.Fatalf("managed deployment not cached: %v %v", ok, err)
	}
	if d.ManagedFields != nil {
		t.Fatal("managedFields kept in the cache")
	}
	if _, ok, _ := s.Deployment("ns1", "unmanaged"); ok {
		t.Fatal("a Deployment without the managed-by label was cached")
	}
	obj, ok, err := s.InferenceService("ns2", "b")
	if err != nil || !ok {
		t.Fatalf("isvc cached %v, err %v", ok, err)
	}
	if isvc, typed := obj.(*crd.InferenceService); !typed || isvc.ManagedFields != nil || isvc.Spec.Model != "m" ||
		isvc.Spec.Replicas != 1 || isvc.APIVersion != crd.GroupVersion.String() || isvc.Kind != crd.Kind {
		t.Fatalf("isvc not cached typed without managedFields: %#v", obj)
	}
	// One that does not decode stays unstructured, for the controller to report.
	if obj, ok, _ := s.InferenceService("ns1", "bad"); !ok {
		t.Fatal("undecodable isvc not cached")
	} else if _, raw := obj.(*unstructured.Unstructured); !raw {
		t.Fatalf("undecodable isvc cached as %T", obj)
	}
	pods, err := s.Pods("ns1", "a-pod")
	if err != nil || len(pods) != 1 {
		t.Fatalf("pods %d %v", len(pods), err)
	}
	if p := pods[0]; p.Spec.NodeName != "n1" || len(p.Spec.Containers) != 0 || p.ManagedFields != nil {
		t.Fatalf("pod not reduced to what is read: %+v", p.Spec)
	}
	if l := pods[0].Labels; len(l) != 1 || l["ai.example.com/inferenceservice"] != "a-pod" {
		t.Fatalf("pod labels %v, want only the instance label", l)
	}
	if st := pods[0].Status; st.Phase != corev1.PodRunning || st.PodIP != "" || len(st.ContainerStatuses) != 1 ||
		st.ContainerStatuses[0].Image != "" || st.ContainerStatuses[0].RestartCount != 3 ||
		st.ContainerStatuses[0].State.Waiting == nil || st.ContainerStatuses[0].State.Waiting.Reason != "CrashLoopBackOff" {
		t.Fatalf("pod status not reduced to what the diagnosis reads: %+v", st)
	}
	rss, err := s.ReplicaSets("ns1", "a-rs")
	if err != nil || len(rss) != 1 || len(rss[0].Spec.Template.Spec.Containers) != 0 {
		t.Fatalf("replicasets %v %v", rss, err)
	}
	if other, _ := s.Pods("ns1", "a"); len(other) != 0 {
		t.Fatalf("pods of another instance: %v", other)
	}
	if _, ok, _ := s.InferenceService("ns1", "a"); !ok || !s.Watches("anything") {
		t.Fatal("cluster-wide scope should see both isvcs and every namespace")
	}
}

func TestNamespaceScope(t *testing.T) {
	s := newSet(t, []string{"ns1"})
	if _, ok, _ := s.Deployment("ns2", "b"); ok {
		t.Fatal("a namespace outside the scope was cached")
	}
	if !s.Watches("ns1") || s.Watches("ns2") {
		t.Fatal("Watches disagrees with the scope")
	}
	if _, ok, _ := s.InferenceService("ns1", "a"); !ok {
		t.Fatal("isvc in scope not cached")
	}
}

func TestStripInferenceServiceAndHPA(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetAnnotations(map[string]string{LastAppliedAnnotation: "{...}", "keep": "me"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	if _, err := StripInferenceService(u); err != nil {
		t.Fatal(err)
	}
	if a := u.GetAnnotations(); len(a) != 1 || a["keep"] != "me" || u.GetManagedFields() != nil {
		t.Fatalf("annotations %v, managedFields %v", a, u.GetManagedFields())
	}
	h := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2}}
	if _, err := StripHPA(h); err != nil {
		t.Fatal(err)
	}
	if h.Status.CurrentReplicas != 0 || h.Spec.MaxReplicas != 3 {
		t.Fatalf("hpa %+v", h)
	}
}

// TestStripKeepsWhatIsRead: the cached Deployment, Service and Pod keep what the controller
// compares and the diagnosis reads, and drop the rest.
func TestStripKeepsWhatIsRead(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"x": "y"},
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "3", "ai.example.com/replicas": "2"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"x": "y"}, Annotations: map[string]string{"restartedAt": "now"}},
				Spec: corev1.PodSpec{PriorityClassName: "p", DNSPolicy: corev1.DNSClusterFirst,
					Containers: []corev1.Container{{Name: "proxy", Image: "envoy"}, {
						Name: ContainerName, Image: "vllm", Args: []string{"--model", "m"}, Env: []corev1.EnvVar{{Name: "A"}},
						Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
						ReadinessProbe: &corev1.Probe{PeriodSeconds: 5}, TerminationMessagePath: "/dev/termination-log",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
					}},
					Volumes: []corev1.Volume{{Name: "shm"}},
				},
			},
		},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 1, Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing}}},
	}
	o, _ := StripDeployment(d)
	got := o.(*appsv1.Deployment)
	if *got.Spec.Replicas != 2 || got.Labels["x"] != "y" || got.Annotations["ai.example.com/replicas"] != "2" ||
		got.Spec.Template.Labels["x"] != "y" || got.Spec.Template.Spec.PriorityClassName != "p" || len(got.Spec.Template.Spec.Volumes) != 1 ||
		got.Status.ReadyReplicas != 1 || len(got.Status.Conditions) != 1 {
		t.Fatalf("dropped what is read: %+v", got)
	}
	if len(got.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("containers %+v", got.Spec.Template.Spec.Containers)
	}
	c := got.Spec.Template.Spec.Containers[0]
	if c.Name != ContainerName || c.Image != "vllm" || len(c.Args) != 2 || len(c.Ports) != 1 || c.ReadinessProbe == nil || c.Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 1 {
		t.Fatalf("model server container %+v", c)
	}
	if len(got.Annotations) != 1 || got.Spec.Selector != nil || got.Spec.Strategy.Type != "" || got.Spec.Template.Annotations != nil ||
		got.Spec.Template.Spec.DNSPolicy != "" || c.Env != nil || c.TerminationMessagePath != "" {
		t.Fatalf("kept what is never read: %+v", got)
	}

	sv := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"x": "y"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"x": "y"}, Ports: []corev1.ServicePort{{Name: "http", Port: 8000}},
			ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}
	o, _ = StripService(sv)
	gs := o.(*corev1.Service)
	if gs.Labels["x"] != "y" || gs.Spec.Selector["x"] != "y" || len(gs.Spec.Ports) != 1 || gs.Spec.ClusterIP != "" || gs.Spec.ClusterIPs != nil || gs.Spec.IPFamilies != nil {
		t.Fatalf("service as cached: %+v", gs.Spec)
	}

	p := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodInitialized}, {Type: corev1.PodScheduled, Reason: "Unschedulable"}, {Type: corev1.ContainersReady}, {Type: corev1.PodReady},
	}}}
	o, _ = StripPod(p)
	if cs := o.(*corev1.Pod).Status.Conditions; len(cs) != 2 || cs[0].Type != corev1.PodScheduled || cs[0].Reason != "Unschedulable" || cs[1].Type != corev1.PodReady {
		t.Fatalf("pod conditions as cached: %+v", cs)
	}
}

// TestStartedSince: the cache stamps when it saw a container become started, carries the stamp
// while the container waits for readiness, drops it once ready, and keeps the readiness probe
// only while the diagnosis reads it.
func TestStartedSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	probe := &corev1.Probe{PeriodSeconds: 5, FailureThreshold: 3}
	podAt := func(started, ready bool) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", Annotations: map[string]string{"x": "y"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName, Image: "i", ReadinessProbe: probe}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, Started: ptr.To(started), Ready: ready,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}}}},
		}
	}
	strip := func(p, prev *corev1.Pod, now time.Time) *corev1.Pod {
		o, err := StripPodSeen(p, prev, now)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*corev1.Pod)
	}
	key := StartedSinceAnnotation + ContainerName
	loading := strip(podAt(false, false), nil, t0)
	if len(loading.Annotations) != 0 || len(loading.Spec.Containers) != 0 {
		t.Fatalf("not started: %v %+v", loading.Annotations, loading.Spec.Containers)
	}
	seen := t0.Add(10 * time.Minute)
	started := strip(podAt(true, false), loading, seen)
	if got := started.Annotations[key]; got != seen.Format(time.RFC3339Nano) {
		t.Fatalf("stamp %q, want %s", got, seen)
	}
	if cs := started.Spec.Containers; len(cs) != 1 || cs[0].ReadinessProbe != probe || cs[0].Image != "" {
		t.Fatalf("started, not ready: containers as cached %+v", cs)
	}
	later := strip(podAt(true, false), started, seen.Add(time.Minute))
	if got := later.Annotations[key]; got != seen.Format(time.RFC3339Nano) {
		t.Fatalf("stamp not carried: %q", got)
	}
	if ready := strip(podAt(true, true), later, seen.Add(2*time.Minute)); len(ready.Annotations) != 0 || len(ready.Spec.Containers) != 0 {
		t.Fatalf("ready: %v %+v", ready.Annotations, ready.Spec.Containers)
	}
	// First seen already started (the operator restarted): no stamp, the container's start counts.
	if first := strip(podAt(true, false), nil, seen); len(first.Annotations) != 0 || len(first.Spec.Containers) != 1 {
		t.Fatalf("first seen started: %v %+v", first.Annotations, first.Spec.Containers)
	}
	// A replacement with the same name is another pod.
	other := podAt(true, false)
	other.UID = "u2"
	if got := strip(other, loading, seen); len(got.Annotations) != 0 {
		t.Fatalf("stamp from another pod's history: %v", got.Annotations)
	}
}

// TestReplicaSetKeepsRevision: the diagnosis tells the Deployment's current ReplicaSet by it.
func TestReplicaSetKeepsRevision(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{InstanceLabel: "m", "pod-template-hash": "h"},
		Annotations: map[string]string{RevisionAnnotation: "4", "deployment.kubernetes.io/desired-replicas": "2"}}}
	o, _ := StripReplicaSet(rs)
	if got := o.(*appsv1.ReplicaSet); len(got.Annotations) != 1 || got.Annotations[RevisionAnnotation] != "4" || len(got.Labels) != 1 {
		t.Fatalf("as cached: %v %v", got.Annotations, got.Labels)
	}
}
