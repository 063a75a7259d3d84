package main

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// resolv.conf as the kubelet writes it for each dnsPolicy.
func TestResolvConf(t *testing.T) {
	pod := func(policy v1.DNSPolicy, cfg *v1.PodDNSConfig) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Spec: v1.PodSpec{DNSPolicy: policy, DNSConfig: cfg}}
	}
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"ClusterFirst (the default)", pod("", nil),
			"search team-a.svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.20.0.10\noptions ndots:5\n"},
		{"Default keeps the host's", pod(v1.DNSDefault, nil), ""},
		{"None: dnsConfig only", pod(v1.DNSNone, &v1.PodDNSConfig{Nameservers: []string{"127.9.9.9"}, Searches: []string{"x.test"}}),
			"search x.test\nnameserver 127.9.9.9\n"},
		{"ClusterFirst with options", pod(v1.DNSClusterFirst, &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}),
			"search team-a.svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.20.0.10\noptions ndots:5 ndots:2 edns0\n"},
	} {
		if got := resolvConf(c.pod, "127.20.0.10"); got != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, got, c.want)
		}
	}
}

// A container's volumes written as the kubelet's plugins write them: a Secret's items, a
// ConfigMap's keys, the projected ServiceAccount volume (token, CA, namespace), an emptyDir;
// a missing Secret fails the mount unless optional, and subPath is refused.
func TestPodMounts(t *testing.T) {
	cs := fake.NewClientset(
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls"}, Data: map[string][]byte{"ca.crt": []byte("CA"), "tls.key": []byte("KEY")}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "ROOT"}},
	)
	var audience []string
	cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		audience = tr.Spec.Audiences
		tr.Status.Token = "TOKEN-of-" + tr.Spec.BoundObjectRef.Name
		return true, tr, nil
	})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: v1.PodSpec{
		ServiceAccountName: "sa",
		Volumes: []v1.Volume{
			{Name: "ca", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "tls", Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}},
			{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
			}}}},
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "gone", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope"}}},
			{Name: "maybe", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope", Optional: ptr.To(true)}}},
		},
	}}
	src := volumeSource{client: cs, pod: pod}
	dir := t.TempDir()
	c := &v1.Container{VolumeMounts: []v1.VolumeMount{
		{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
		{Name: "ca", MountPath: "/var/run/metrics-adapter-ca"},
		{Name: "scratch", MountPath: "/mnt/scratch"},
		{Name: "scratch", MountPath: "/mnt/scratch-ro", ReadOnly: true},
		{Name: "maybe", MountPath: "/mnt/maybe"},
	}}
	c.Name = "server"
	mounts, err := podMounts(context.Background(), src, c, dir)
	if err != nil {
		t.Fatal(err)
	}
	// As the kubelet's makeMounts: read-only if the mount says so or the volume's plugin must.
	vols := dir + "/volumes/server"
	want := []string{
		"--ro-bind=" + vols + "/maybe:/mnt/maybe", "--bind=" + dir + "/empty-dir/scratch:/mnt/scratch",
		"--ro-bind=" + dir + "/empty-dir/scratch:/mnt/scratch-ro", "--ro-bind=" + vols + "/ca:/var/run/metrics-adapter-ca",
		"--ro-bind=" + vols + "/kube-api-access:/var/run/secrets/kubernetes.io/serviceaccount",
	}
	if got := podExecArgv("self", "", mounts, nil)[2:]; strings.Join(got, " ") != strings.Join(want, " ")+" --" {
		t.Errorf("mounts %v, want %v", got, want)
	}
	for f, content := range map[string]string{"ca/ca.crt": "CA", "kube-api-access/token": "TOKEN-of-p", "kube-api-access/ca.crt": "ROOT", "kube-api-access/namespace": "ns"} {
		if b, err := os.ReadFile(filepath.Join(vols, f)); err != nil || string(b) != content {
			t.Errorf("%s: %q, %v; want %q", f, b, err, content)
		}
	}
	if _, err := os.Stat(filepath.Join(vols, "ca", "tls.key")); err == nil {
		t.Error("the Secret's unlisted key was written")
	}
	if audience != nil {
		t.Errorf("audiences %v: unset, the API server's", audience)
	}
	for _, bad := range []struct {
		m    v1.VolumeMount
		want string
	}{
		{v1.VolumeMount{Name: "gone", MountPath: "/x"}, `MountVolume.SetUp failed: secret "nope" not found`},
		{v1.VolumeMount{Name: "ca", MountPath: "/x", SubPath: "ca.crt"}, "subPath is not supported"},
		{v1.VolumeMount{Name: "none", MountPath: "/x"}, "names no volume"},
	} {
		_, err := podMounts(context.Background(), src, &v1.Container{VolumeMounts: []v1.VolumeMount{bad.m}}, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.m.Name, err, bad.want)
		}
	}
	if err := writeFile(t.TempDir(), "../escape", nil); err == nil {
		t.Error("a path leaving the volume was written")
	}
}

// The proxy refuses a connection to a Service without ready endpoints, forwards one to a ready
// endpoint on the port the targetPort names, and refuses again once the Service is deleted.
func TestServiceProxy(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = c.Write([]byte("hello from the pod")) }()
		}
	}()
	bport := backend.Addr().(*net.TCPAddr).Port
	svcPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	sel := map[string]string{"app": "m"}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: v1.ServiceSpec{ClusterIP: "127.0.0.1", Selector: sel,
		Ports: []v1.ServicePort{{Port: int32(svcPort), TargetPort: intstr.FromString("http")}}}}
	td := startTestDNS(t, svc)
	p := &serviceProxy{dns: td.d}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.run(ctx)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(svcPort))

	read := func() (string, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		return string(b), err
	}
	// Never listening meanwhile: refused, not accepted and closed.
	for range 4 {
		if _, err := read(); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("a Service without endpoints: %v, want connection refused", err)
		}
		time.Sleep(300 * time.Millisecond) // a proxy sync or two, not a wait for state
	}
	pod := dnsPod("ns", "m-1", "", "", "127.0.0.1", true, sel)
	pod.Spec.Containers = []v1.Container{{Name: "s", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(bport)}}}}
	td.addPod(t, pod)
	eventually(t, "the pod's answer through the ClusterIP", func() bool {
		got, err := read()
		return err == nil && got == "hello from the pod"
	})
	if err := td.client.CoreV1().Services("ns").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "refused once its Service is deleted", func() bool {
		_, err := read()
		return err != nil && strings.Contains(err.Error(), "connection refused")
	})
}

// The helper, run for real (root: a mount namespace): the program sees the pod's resolv.conf
// and its volumes at their mountPaths (a Secret's read-only, an emptyDir writable, its files
// kept in the pod's directory), in a tmpfs where the mount point was missing; the host's files
// and mounts are as they were.
func TestPodExecMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts need root")
	}
	dir := t.TempDir()
	resolv, vol, scratch := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "vol"), filepath.Join(dir, "scratch")
	if err := os.WriteFile(resolv, []byte("nameserver 127.20.0.10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(vol, "token", []byte("TOKEN")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	mountPath := "/run/localcluster-test-" + strconv.Itoa(os.Getpid()) + "/secrets/sa"
	scratchPath := filepath.Join(filepath.Dir(mountPath), "serving-cert")
	script := "cat /etc/resolv.conf " + mountPath + "/token; echo; touch " + mountPath + "/x 2>&1 || true; echo CERT > " + scratchPath + "/tls.crt"
	mounts := []podMount{{src: vol, dst: mountPath, readOnly: true}, {src: scratch, dst: scratchPath}}
	argv := podExecArgv(os.Args[0], resolv, mounts, []string{"/bin/sh", "-c", script})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "EXEC_TEST_CHILD=pod-exec")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"nameserver 127.20.0.10\nTOKEN\n", "Read-only file system"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the program saw %q; want %q in it", out, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(scratch, "tls.crt")); err != nil || string(b) != "CERT\n" {
		t.Errorf("the emptyDir holds %q, %v; want the file the program wrote", b, err)
	}
	if after, _ := os.ReadFile("/etc/resolv.conf"); string(after) != string(hostResolv) {
		t.Errorf("the host's resolv.conf changed: %q", after)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(mountPath))); err == nil {
		t.Errorf("the mount point %s was made on the host", mountPath)
	}
	// Over the host's system directories no tmpfs is laid: the start fails, saying why.
	argv = podExecArgv(os.Args[0], "", []podMount{{src: vol, dst: "/usr/localcluster-test/x", readOnly: true}}, []string{"/bin/true"})
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "EXEC_TEST_CHILD=pod-exec")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "holds the host's files") {
		t.Errorf("a mount point under /usr: %v\n%s", err, out)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}
