package kinds

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

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
	if c.Name != ContainerName || c.Image != "vllm" || len(c.Args) != 2 || len(c.Env) != 1 || len(c.Ports) != 1 || c.ReadinessProbe == nil || c.Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 1 {
		t.Fatalf("model server container %+v", c)
	}
	if len(got.Annotations) != 1 || got.Spec.Selector != nil || got.Spec.Strategy.Type != "" || got.Spec.Template.Annotations != nil ||
		got.Spec.Template.Spec.DNSPolicy != "" || c.TerminationMessagePath != "" {
		t.Fatalf("kept what is never read: %+v", got)
	}

	// The placement fields the operator set (its record names the template annotations) stay;
	// others' template annotations go.
	d = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{PlacementAnnotation: "tolerations,serviceAccountName,nodeSelector/pool,annotation/x/y"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"x/y": "1", "kubectl.kubernetes.io/restartedAt": "now"}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}, Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
				Affinity: &corev1.Affinity{}, TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1}}, ImagePullSecrets: []corev1.LocalObjectReference{{Name: "r"}},
				ServiceAccountName: "sa", DeprecatedServiceAccount: "sa", RuntimeClassName: ptr.To("nvidia")}}}}
	o, _ = StripDeployment(d)
	ps := o.(*appsv1.Deployment).Spec.Template
	if ps.Spec.NodeSelector["pool"] != "gpu" || len(ps.Spec.Tolerations) != 1 || ps.Spec.Affinity == nil || len(ps.Spec.TopologySpreadConstraints) != 1 ||
		len(ps.Spec.ImagePullSecrets) != 1 || ps.Spec.DeprecatedServiceAccount != "sa" || ps.Spec.RuntimeClassName == nil ||
		len(ps.Annotations) != 1 || ps.Annotations["x/y"] != "1" {
		t.Fatalf("placement dropped or others' annotations kept: %+v", ps)
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

	p := &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.1.0.7", HostIP: "192.168.0.1", PodIPs: []corev1.PodIP{{IP: "10.1.0.7"}}, Conditions: []corev1.PodCondition{
		{Type: corev1.PodInitialized}, {Type: corev1.PodScheduled, Reason: "Unschedulable"}, {Type: corev1.ContainersReady}, {Type: corev1.PodReady},
	}}}
	o, _ = StripPod(p)
	if cs := o.(*corev1.Pod).Status.Conditions; len(cs) != 2 || cs[0].Type != corev1.PodScheduled || cs[0].Reason != "Unschedulable" || cs[1].Type != corev1.PodReady {
		t.Fatalf("pod conditions as cached: %+v", cs)
	}
	// The adapter step dials a ready pod at its IP.
	if st := o.(*corev1.Pod).Status; st.PodIP != "10.1.0.7" || st.HostIP != "" || st.PodIPs != nil {
		t.Fatalf("pod addresses as cached: ip %q host %q ips %v", st.PodIP, st.HostIP, st.PodIPs)
	}
	// Until scheduled, its tolerations, node selector and node affinity (what keeps it off
	// nodes); once on a node, none of them.
	placed := corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}, Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}, PodAntiAffinity: &corev1.PodAntiAffinity{}}}
	o, _ = StripPod(&corev1.Pod{Spec: *placed.DeepCopy()})
	if ps := o.(*corev1.Pod).Spec; ps.NodeSelector["pool"] != "gpu" || len(ps.Tolerations) != 1 || ps.Affinity == nil || ps.Affinity.NodeAffinity == nil || ps.Affinity.PodAntiAffinity != nil {
		t.Fatalf("pending pod's placement as cached: %+v", ps)
	}
	placed.NodeName = "n"
	o, _ = StripPod(&corev1.Pod{Spec: placed})
	if ps := o.(*corev1.Pod).Spec; ps.NodeSelector != nil || ps.Tolerations != nil || ps.Affinity != nil {
		t.Fatalf("a scheduled pod's placement kept: %+v", ps)
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
