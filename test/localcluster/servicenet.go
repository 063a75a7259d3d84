// The Service network (--service-network): ClusterIPs from a loopback block of this cluster's
// own (127.S.0.0/16), reached through a userspace proxy (serviceproxy.go), and the cluster DNS
// also on 127.S.0.10:53, where a resolv.conf can name it. A process of an exec image then runs
// as in a pod: in a mount namespace of its own where /etc/resolv.conf is the pod's (the
// cluster DNS, the pod's search list, ndots:5) and its volumes are bound at their mountPaths
// (Secrets, ConfigMaps, the projected ServiceAccount token read-only; an emptyDir writable
// unless its mount says readOnly), so a client in it dials a Service by its name, as `helm
// test`'s Pod does, and a server writes its certificate where its manifest says. Off by default: it
// needs root (port 53, mounts), which the rest of the local cluster does not.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// podExecCommand is the argument that makes this binary the helper that enters a pod's
// mounts: localcluster pod-exec [--resolv-conf=F] [--ro-bind=SRC:DST | --bind=SRC:DST]... -- PROGRAM ARGS...
const podExecCommand = "pod-exec"

// serviceNetwork is the Service network's addresses; nil when --service-network is off.
type serviceNetwork struct {
	octet int // 127.S.0.0/16
}

func (n *serviceNetwork) cidr() string  { return fmt.Sprintf("127.%d.0.0/16", n.octet) }
func (n *serviceNetwork) dnsIP() string { return fmt.Sprintf("127.%d.0.10", n.octet) }

// resolvConf is a pod's /etc/resolv.conf as the kubelet writes it for its dnsPolicy: "" when
// the host's is kept (Default); ClusterFirst (and ClusterFirstWithHostNet) names the cluster
// DNS with the namespace's search list; None, only what dnsConfig gives.
func resolvConf(pod *v1.Pod, dnsIP string) string {
	var servers, search []string
	opts := []string{"ndots:5"}
	switch pod.Spec.DNSPolicy {
	case v1.DNSDefault:
		return ""
	case v1.DNSNone:
		opts = nil
	default:
		servers = []string{dnsIP}
		search = []string{pod.Namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = append(servers, c.Nameservers...)
		search = append(search, c.Searches...)
		for _, o := range c.Options {
			if o.Value != nil {
				opts = append(opts, o.Name+":"+*o.Value)
			} else {
				opts = append(opts, o.Name)
			}
		}
	}
	var b strings.Builder
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(opts) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(opts, " "))
	}
	return b.String()
}

// volumeSource reads what a volume holds: the API objects it names and tokens it requests.
type volumeSource struct {
	client kubernetes.Interface
	pod    *v1.Pod
}

// materialize writes a volume's files under dir, as the kubelet's volume plugins do: a
// Secret's or ConfigMap's keys (or the items listed), a projected volume's sources, an empty
// directory. A missing object fails the mount unless the source is optional.
func (s volumeSource) materialize(ctx context.Context, vol *v1.Volume, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	switch {
	case vol.EmptyDir != nil:
		return nil
	case vol.Secret != nil:
		return s.secret(ctx, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.Optional, dir)
	case vol.ConfigMap != nil:
		return s.configMap(ctx, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.Optional, dir)
	case vol.Projected != nil:
		for _, src := range vol.Projected.Sources {
			var err error
			switch {
			case src.Secret != nil:
				err = s.secret(ctx, src.Secret.Name, src.Secret.Items, src.Secret.Optional, dir)
			case src.ConfigMap != nil:
				err = s.configMap(ctx, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, dir)
			case src.ServiceAccountToken != nil:
				err = s.token(ctx, src.ServiceAccountToken, dir)
			case src.DownwardAPI != nil:
				err = s.downward(src.DownwardAPI.Items, dir)
			default:
				err = fmt.Errorf("projected volume %q: a source this kubelet cannot project", vol.Name)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("volume %q: its type cannot be mounted into a process by this kubelet", vol.Name)
}

func (s volumeSource) secret(ctx context.Context, name string, items []v1.KeyToPath, optional *bool, dir string) error {
	sec, err := s.client.CoreV1().Secrets(s.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return unavailable("secret", name, optional, err)
	}
	return writeKeys(sec.Data, items, dir, "secret "+name)
}

func (s volumeSource) configMap(ctx context.Context, name string, items []v1.KeyToPath, optional *bool, dir string) error {
	cm, err := s.client.CoreV1().ConfigMaps(s.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return unavailable("configmap", name, optional, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeKeys(data, items, dir, "configmap "+name)
}

// unavailable is the mount's failure to read its object: none when an optional one is absent.
func unavailable(kind, name string, optional *bool, err error) error {
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil
		}
		return fmt.Errorf("MountVolume.SetUp failed: %s %q not found", kind, name)
	}
	return fmt.Errorf("MountVolume.SetUp failed: reading %s %q: %w", kind, name, err)
}

// token is the projected ServiceAccount token: a TokenRequest bound to the pod, with the
// source's audience and lifetime (the API server's defaults when unset).
func (s volumeSource) token(ctx context.Context, src *v1.ServiceAccountTokenProjection, dir string) error {
	sa := s.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: s.pod.Name, UID: s.pod.UID}}
	if src.Audience != "" {
		spec.Audiences = []string{src.Audience}
	}
	tr, err := s.client.CoreV1().ServiceAccounts(s.pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("MountVolume.SetUp failed: failed to fetch token: %w", err)
	}
	return writeFile(dir, src.Path, []byte(tr.Status.Token))
}

// downward writes the pod's own fields; only metadata ones, which are all a projected
// downwardAPI of the service account volume asks for.
func (s volumeSource) downward(items []v1.DownwardAPIVolumeFile, dir string) error {
	for _, it := range items {
		if it.FieldRef == nil {
			return fmt.Errorf("downwardAPI %s: only fieldRef is projected by this kubelet", it.Path)
		}
		v, err := fieldRefValue(it.FieldRef, s.pod, s.pod.Status.PodIP, s.pod.Status.HostIP)
		if err != nil {
			return err
		}
		if err := writeFile(dir, it.Path, []byte(v)); err != nil {
			return err
		}
	}
	return nil
}

// writeKeys writes every key, or the items listed (a missing one is an error, as the kubelet's).
func writeKeys(data map[string][]byte, items []v1.KeyToPath, dir, what string) error {
	if len(items) == 0 {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := writeFile(dir, k, data[k]); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("MountVolume.SetUp failed: %s has no key %q", what, it.Key)
		}
		if err := writeFile(dir, it.Path, b); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes rel under dir; a path leaving dir is refused, as the API server refuses it.
func writeFile(dir, rel string, b []byte) error {
	p := filepath.Join(dir, rel)
	if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
		return fmt.Errorf("volume path %q leaves the volume", rel)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

// podMount is one volume bound into a container: read-only unless the kubelet would mount it
// writable (an emptyDir whose volumeMount is not readOnly; Secrets, ConfigMaps, projected and
// downwardAPI volumes are always read-only, their plugins' GetAttributes says so).
type podMount struct {
	src, dst string
	readOnly bool
}

// podMounts materializes the container's volumes under the pod's directory (an emptyDir once a
// pod, shared by its containers and kept across their restarts; the others per container) and
// returns them in mountPath order; subPath mounts are not supported.
func podMounts(ctx context.Context, src volumeSource, c *v1.Container, podDir string) ([]podMount, error) {
	vols := map[string]*v1.Volume{}
	for i := range src.pod.Spec.Volumes {
		vols[src.pod.Spec.Volumes[i].Name] = &src.pod.Spec.Volumes[i]
	}
	var out []podMount
	done := map[string]bool{}
	for _, m := range c.VolumeMounts {
		vol := vols[m.Name]
		if vol == nil {
			return nil, fmt.Errorf("volumeMount %q names no volume of the pod", m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			return nil, fmt.Errorf("volumeMount %q: subPath is not supported by this kubelet", m.Name)
		}
		vdir := filepath.Join(podDir, "volumes", c.Name, m.Name)
		if vol.EmptyDir != nil {
			vdir = filepath.Join(podDir, "empty-dir", m.Name)
		}
		if !done[m.Name] {
			if err := src.materialize(ctx, vol, vdir); err != nil {
				return nil, err
			}
			done[m.Name] = true
		}
		out = append(out, podMount{src: vdir, dst: m.MountPath, readOnly: m.ReadOnly || vol.EmptyDir == nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dst < out[j].dst })
	return out, nil
}

// podExecArgv is the helper's command line that runs argv in the pod's mounts (bubblewrap's
// flag names: --ro-bind and --bind).
func podExecArgv(self, resolv string, mounts []podMount, argv []string) []string {
	out := []string{self, podExecCommand}
	if resolv != "" {
		out = append(out, "--resolv-conf="+resolv)
	}
	for _, m := range mounts {
		flag := "--bind="
		if m.readOnly {
			flag = "--ro-bind="
		}
		out = append(out, flag+m.src+":"+m.dst)
	}
	return append(append(out, "--"), argv...)
}

// tmpfsParents are where a missing mount point may be made: in a tmpfs over the nearest
// directory that exists, private to the process, so the host's files stay as they are. The
// host's own system directories are not hidden that way.
var tmpfsParents = []string{"/run", "/mnt", "/opt", "/srv", "/var/lib/kubelet"}

// podExec is the helper: in the mount namespace its parent started it in (CLONE_NEWNS), it
// makes every mount private, mounts the pod's volumes and resolv.conf, and executes the
// program in its own place, so the kubelet's process is the container's.
func podExec(args []string) error {
	var resolv string
	var mounts []podMount
	i := 0
	for ; i < len(args) && args[i] != "--"; i++ {
		switch a := args[i]; {
		case strings.HasPrefix(a, "--resolv-conf="):
			resolv = strings.TrimPrefix(a, "--resolv-conf=")
		case strings.HasPrefix(a, "--ro-bind="), strings.HasPrefix(a, "--bind="):
			flag, m, _ := strings.Cut(a, "=")
			src, dst, ok := strings.Cut(m, ":")
			if !ok || !filepath.IsAbs(dst) {
				return fmt.Errorf("%s %q: want SRC:/DST", flag, m)
			}
			mounts = append(mounts, podMount{src: src, dst: dst, readOnly: flag == "--ro-bind"})
		default:
			return fmt.Errorf("%s: unknown argument %q", podExecCommand, a)
		}
	}
	if i >= len(args)-1 {
		return fmt.Errorf("%s: no program after --", podExecCommand)
	}
	argv := args[i+1:]
	// Nothing mounted here propagates to the host's namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	tmpfs := map[string]bool{}
	for _, m := range mounts {
		if err := mountPoint(m.dst, true, tmpfs); err != nil {
			return err
		}
		if err := syscall.Mount(m.src, m.dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("mounting %s at %s: %w", m.src, m.dst, err)
		}
		if !m.readOnly {
			continue
		}
		if err := syscall.Mount("", m.dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("remounting %s read-only: %w", m.dst, err)
		}
	}
	if resolv != "" {
		// Last: a tmpfs above may hide where /etc/resolv.conf's link points.
		target, err := linkTarget("/etc/resolv.conf")
		if err != nil {
			return err
		}
		if err := mountPoint(target, false, tmpfs); err != nil {
			return err
		}
		if err := syscall.Mount(resolv, target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("mounting the pod's resolv.conf at %s: %w", target, err)
		}
	}
	bin := argv[0]
	env := os.Environ()
	return syscall.Exec(bin, argv, env)
}

// linkTarget follows p's symbolic links, the last one's target whether it exists or not.
func linkTarget(p string) (string, error) {
	for range 8 {
		l, err := os.Readlink(p)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) && errors.Is(pe.Err, syscall.EINVAL) {
				return p, nil // not a link
			}
			if errors.Is(err, os.ErrNotExist) {
				return p, nil
			}
			return "", err
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(p), l)
		}
		p = l
	}
	return "", fmt.Errorf("%s: too many links", p)
}

// mountPoint makes p exist (a directory, or a file when dir is false): where it does not, a
// tmpfs over its nearest existing ancestor, if that is one of tmpfsParents (or under one).
func mountPoint(p string, dir bool, tmpfs map[string]bool) error {
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	anc := filepath.Dir(p)
	for {
		if _, err := os.Stat(anc); err == nil {
			break
		}
		anc = filepath.Dir(anc)
	}
	real, err := filepath.EvalSymlinks(anc)
	if err != nil {
		return err
	}
	allowed := false
	for _, t := range tmpfsParents {
		allowed = allowed || real == t || strings.HasPrefix(real, t+"/")
	}
	if !allowed && !tmpfs[real] && !underTmpfs(real, tmpfs) {
		return fmt.Errorf("mount point %s: %s holds the host's files; this kubelet makes mount points only under %s", p, real, strings.Join(tmpfsParents, ", "))
	}
	if !tmpfs[real] && !underTmpfs(real, tmpfs) {
		if err := syscall.Mount("tmpfs", real, "tmpfs", 0, "mode=755"); err != nil {
			return fmt.Errorf("tmpfs at %s: %w", real, err)
		}
		tmpfs[real] = true
	}
	if dir {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, nil, 0o644)
}

func underTmpfs(p string, tmpfs map[string]bool) bool {
	for t := range tmpfs {
		if strings.HasPrefix(p, t+"/") {
			return true
		}
	}
	return false
}
