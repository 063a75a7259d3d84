// What a serving container's process sees: its environment (env, envFrom, service links), GPUs,
// memory limit, /dev/shm and mounts, resolved as a kubelet and its runtime resolve them.

package main

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/kubernetes/pkg/api/v1/resource"
	podshelper "k8s.io/kubernetes/pkg/apis/core/pods"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/kubernetes/pkg/kubelet/envvars"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
)

// objectGetter reads the Secrets and ConfigMaps a container's environment names.
type objectGetter interface {
	secret(ctx context.Context, ns, name string) (*v1.Secret, error)
	configMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error)
}

// serviceEnv is the kubelet's getServiceEnvVarMap: the Services of the pod's namespace (with
// service links on) and the `kubernetes` Service of the default namespace (always), as
// envvars.FromServices names them.
func serviceEnv(services corelisters.ServiceLister, ns string, enableServiceLinks bool) (map[string]string, error) {
	all, err := services.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	byName := map[string]*v1.Service{}
	for _, svc := range all {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
			continue
		}
		switch {
		case svc.Namespace == metav1.NamespaceDefault && svc.Name == "kubernetes":
			if _, ok := byName[svc.Name]; !ok {
				byName[svc.Name] = svc
			}
		case svc.Namespace == ns && enableServiceLinks:
			byName[svc.Name] = svc
		}
	}
	list := make([]*v1.Service, 0, len(byName))
	for _, svc := range byName {
		list = append(list, svc)
	}
	env := map[string]string{}
	for _, e := range envvars.FromServices(list) {
		env[e.Name] = e.Value
	}
	return env, nil
}

// expandCommand is the kubelet's ExpandContainerCommandAndArgs for one of command or args:
// each $(VAR) of the container's environment expanded, $$ an escaped $, a reference to no
// variable left as written.
func expandCommand(in []string, env map[string]string) []string {
	if in == nil {
		return nil
	}
	mapping := expansion.MappingFuncFor(env)
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expansion.Expand(s, mapping)
	}
	return out
}

// notFound is the error the kubelet's Secret and ConfigMap managers return: `secret "x" not found`.
func notFound(resource, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
}

// containerEnv is the kubelet's makeEnvironmentVariables: envFrom first, env over it ($(VAR)
// expanded against both and the service links), then the service links not already set.
// An error is what the kubelet reports as CreateContainerConfigError.
func containerEnv(ctx context.Context, get objectGetter, services corelisters.ServiceLister, pod *v1.Pod, c *v1.Container, podIP, hostIP string) (map[string]string, error) {
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	svcEnv, err := serviceEnv(services, pod.Namespace, links)
	if err != nil {
		return nil, err
	}
	secrets := map[string]*v1.Secret{}
	configMaps := map[string]*v1.ConfigMap{}
	getSecret := func(name string) (*v1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		s, err := get.secret(ctx, pod.Namespace, name)
		if err == nil {
			secrets[name] = s
		}
		return s, err
	}
	getConfigMap := func(name string) (*v1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		cm, err := get.configMap(ctx, pod.Namespace, name)
		if err == nil {
			configMaps[name] = cm
		}
		return cm, err
	}
	optional := func(b *bool) bool { return b != nil && *b }
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := getConfigMap(from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, err
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			s, err := getSecret(from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(from.SecretRef.Optional) {
					continue
				}
				return nil, err
			}
			for k, v := range s.Data {
				env[from.Prefix+k] = string(v)
			}
		}
	}
	mapping := expansion.MappingFuncFor(env, svcEnv)
	for _, e := range c.Env {
		val := e.Value
		switch {
		case val != "":
			val = expansion.Expand(val, mapping)
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			if val, err = fieldRefValue(e.ValueFrom.FieldRef, pod, podIP, hostIP); err != nil {
				return nil, err
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			fs := e.ValueFrom.ResourceFieldRef
			if fs.ContainerName == "" {
				val, err = resourcehelper.ExtractContainerResourceValue(fs, c)
			} else {
				val, err = resourcehelper.ExtractResourceValueByContainerName(fs, pod, fs.ContainerName)
			}
			if err != nil {
				return nil, err
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, err := getConfigMap(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(ref.Optional) {
					continue
				}
				return nil, err
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if optional(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, pod.Namespace, ref.Name)
			}
			val = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, err := getSecret(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(ref.Optional) {
					continue
				}
				return nil, err
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				if optional(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %v in Secret %v/%v", ref.Key, pod.Namespace, ref.Name)
			}
			val = string(v)
		}
		env[e.Name] = val
	}
	for k, v := range svcEnv {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	return env, nil
}

// fieldRefValue is the kubelet's podFieldSelectorRuntimeValue.
func fieldRefValue(fs *v1.ObjectFieldSelector, pod *v1.Pod, podIP, hostIP string) (string, error) {
	version := fs.APIVersion
	if version == "" {
		version = "v1" // the API server's default
	}
	path, _, err := podshelper.ConvertDownwardAPIFieldLabel(version, fs.FieldPath, "")
	if err != nil {
		return "", err
	}
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, path)
}

// gpuCount is what the device plugins allocate: the container's limit of any */gpu resource.
func gpuCount(c *v1.Container) int {
	n := 0
	for name, q := range c.Resources.Limits {
		if strings.HasSuffix(string(name), "/gpu") {
			n += int(q.Value())
		}
	}
	return n
}

// shmSize is what the runtime mounts at /dev/shm: -1 its own 64Mi (no volume there), else an
// emptyDir's sizeLimit in bytes, 0 without one.
func shmSize(pod *v1.Pod, c *v1.Container) int64 {
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/dev/shm" {
			continue
		}
		for _, vol := range pod.Spec.Volumes {
			if vol.Name == m.Name && vol.EmptyDir != nil {
				if vol.EmptyDir.SizeLimit != nil {
					return vol.EmptyDir.SizeLimit.Value()
				}
				return 0
			}
		}
	}
	return -1
}

// readOnlyMounts are the container's mount paths that are read-only: the mount says so, or
// its claim volume does.
func readOnlyMounts(pod *v1.Pod, c *v1.Container) map[string]bool {
	claimRO := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly {
			claimRO[v.Name] = true
		}
	}
	out := map[string]bool{}
	for _, m := range c.VolumeMounts {
		if m.ReadOnly || claimRO[m.Name] {
			out[strings.TrimSuffix(m.MountPath, "/")] = true
		}
	}
	return out
}

// mountIdentities maps each mount path to what backs it, so a weights cache lives as long
// as its volume: a PVC outlives the pod, an emptyDir dies with it.
func mountIdentities(pod *v1.Pod, c *v1.Container) map[string]string {
	vols := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		vol, ok := vols[m.Name]
		if !ok {
			continue
		}
		var id string
		switch {
		case vol.PersistentVolumeClaim != nil:
			id = "pvc:" + pod.Namespace + "/" + vol.PersistentVolumeClaim.ClaimName
		case vol.EmptyDir != nil:
			id = "emptyDir:" + string(pod.UID) + "/" + vol.Name
		case vol.ConfigMap != nil:
			id = "configMap:" + pod.Namespace + "/" + vol.ConfigMap.Name
		case vol.Secret != nil:
			id = "secret:" + pod.Namespace + "/" + vol.Secret.SecretName
		case vol.HostPath != nil:
			id = "hostPath:" + vol.HostPath.Path
		default:
			id = "volume:" + string(pod.UID) + "/" + vol.Name
		}
		if m.SubPath != "" {
			id += "/" + m.SubPath
		}
		out[m.MountPath] = id
	}
	return out
}
