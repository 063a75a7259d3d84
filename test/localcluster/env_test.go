package main

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

type objects struct {
	secrets map[string]*v1.Secret
}

func (o objects) secret(_ context.Context, _, name string) (*v1.Secret, error) {
	if s, ok := o.secrets[name]; ok {
		return s, nil
	}
	return nil, notFound("secret", name)
}

func (o objects) configMap(_ context.Context, _, name string) (*v1.ConfigMap, error) {
	return nil, notFound("configmap", name)
}

func serviceLister(t *testing.T, svcs ...*v1.Service) corelisters.ServiceLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range svcs {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewServiceLister(idx)
}

func service(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestContainerEnvServiceLinks(t *testing.T) {
	services := serviceLister(t,
		service("default", "kubernetes", "10.0.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		service("team", "vllm", "10.0.3.7", v1.ServicePort{Name: "http", Port: 8000, TargetPort: intstr.FromInt(8000)}),
		service("team", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		service("other", "elsewhere", "10.0.9.9", v1.ServicePort{Port: 80}),
	)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"}}
	c := &v1.Container{Name: "server", Env: []v1.EnvVar{{Name: "A", Value: "x-$(VLLM_SERVICE_HOST)"}}}
	env, err := containerEnv(context.Background(), objects{}, services, pod, c, "127.16.0.1", "127.0.1.1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"A":                             "x-10.0.3.7",
		"VLLM_SERVICE_HOST":             "10.0.3.7",
		"VLLM_SERVICE_PORT":             "8000",
		"VLLM_SERVICE_PORT_HTTP":        "8000",
		"VLLM_PORT":                     "tcp://10.0.3.7:8000",
		"VLLM_PORT_8000_TCP":            "tcp://10.0.3.7:8000",
		"VLLM_PORT_8000_TCP_PROTO":      "tcp",
		"VLLM_PORT_8000_TCP_PORT":       "8000",
		"VLLM_PORT_8000_TCP_ADDR":       "10.0.3.7",
		"KUBERNETES_SERVICE_HOST":       "10.0.0.1",
		"KUBERNETES_SERVICE_PORT":       "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT":               "tcp://10.0.0.1:443",
		"KUBERNETES_PORT_443_TCP":       "tcp://10.0.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT":  "443",
		"KUBERNETES_PORT_443_TCP_ADDR":  "10.0.0.1",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if len(env) != len(want) {
		t.Errorf("env %v, want exactly %v", env, want)
	}

	off := false
	pod.Spec.EnableServiceLinks = &off
	env, err = containerEnv(context.Background(), objects{}, services, pod, &v1.Container{}, "127.16.0.1", "127.0.1.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env["VLLM_PORT"]; ok || env["KUBERNETES_SERVICE_HOST"] != "10.0.0.1" {
		t.Errorf("enableServiceLinks false: %v, want only the kubernetes Service's", env)
	}
}

func TestContainerEnvSources(t *testing.T) {
	services := serviceLister(t)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p", UID: "u1"}}
	opt := true
	c := &v1.Container{Name: "server", Env: []v1.EnvVar{
		{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}},
		{Name: "IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "MAYBE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Key: "k", Optional: &opt}}},
	}}
	_, err := containerEnv(context.Background(), objects{}, services, pod, c, "127.16.0.9", "127.0.1.1")
	if err == nil || err.Error() != `secret "hf" not found` {
		t.Fatalf("missing Secret: %v, want secret \"hf\" not found", err)
	}
	get := objects{secrets: map[string]*v1.Secret{"hf": {Data: map[string][]byte{"other": nil}}}}
	if _, err = containerEnv(context.Background(), get, services, pod, c, "127.16.0.9", "127.0.1.1"); err == nil || err.Error() != "couldn't find key token in Secret team/hf" {
		t.Fatalf("missing key: %v", err)
	}
	get.secrets["hf"].Data["token"] = []byte("hf_x")
	env, err := containerEnv(context.Background(), get, services, pod, c, "127.16.0.9", "127.0.1.1")
	if err != nil {
		t.Fatal(err)
	}
	if env["TOKEN"] != "hf_x" || env["IP"] != "127.16.0.9" || env["NAME"] != "p" {
		t.Errorf("env %v", env)
	}
	if _, ok := env["MAYBE"]; ok {
		t.Errorf("an optional missing ConfigMap set MAYBE")
	}
}

func TestExpandCommand(t *testing.T) {
	env := map[string]string{"LWS_GROUP_SIZE": "2", "LWS_LEADER_ADDRESS": "big-0.big.ns", "EMPTY": ""}
	for _, tc := range []struct{ in, want string }{
		{"--ray_cluster_size=$(LWS_GROUP_SIZE)", "--ray_cluster_size=2"},
		{"--ray_address=$(LWS_LEADER_ADDRESS)", "--ray_address=big-0.big.ns"},
		{"$$(LWS_GROUP_SIZE) is escaped", "$(LWS_GROUP_SIZE) is escaped"},
		{"$(MISSING) stays", "$(MISSING) stays"},
		{"$(EMPTY)x", "x"},
		{"$LWS_GROUP_SIZE is the shell's", "$LWS_GROUP_SIZE is the shell's"},
		{"$$ and $", "$ and $"},
		{"unclosed $(LWS_GROUP_SIZE", "unclosed $(LWS_GROUP_SIZE"},
	} {
		if got := expandCommand([]string{tc.in}, env); got[0] != tc.want {
			t.Errorf("expand %q = %q, want %q", tc.in, got[0], tc.want)
		}
	}
	if expandCommand(nil, env) != nil {
		t.Error("nil command must stay nil (the image's entrypoint)")
	}
}
