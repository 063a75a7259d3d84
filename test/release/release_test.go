package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/test/chart"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/image/oci"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// testVersion is the release the test builds; a pre-release, as no tag names it.
const testVersion = "v0.0.1-test.1"

// PluginPlatformsEnv narrows the plugin's platforms the test builds (cross-compiling all six
// is the slow part of a cold release); make release builds every one.
const PluginPlatformsEnv = "RELEASE_TEST_PLUGIN_PLATFORMS"

// ImageArchsEnv narrows the image index's architectures the test builds (make test: the
// host's, since a cold cross-compile of the image's three binaries is most of a release's
// time); make release and make release-check build amd64 and arm64.
const ImageArchsEnv = "RELEASE_TEST_IMAGE_ARCHS"

const systemNamespace = testenv.SystemNamespace

// TestRelease runs make release and checks each artifact: the image index lists linux/amd64
// and linux/arm64 with configs that say so, the sums and the krew manifest match the files,
// the manifests pin exactly what the packaged chart pins; then it runs the README's two install
// commands on the local cluster (the release's files for its URLs), with the image loaded from
// the release's archive, and the operator becomes Available from each; the chart's passes helm test.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release and starts the local cluster")
	}
	// A cold release cross-compiles the image for two platforms: most of this bound.
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := chart.Bin(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := cluster.KubectlPath(ctx)
	if err != nil {
		t.Fatal(err)
	}
	platforms := os.Getenv(PluginPlatformsEnv)
	if platforms == "" {
		// The host's, run below: a cold cross-compile of the plugin takes about 7 minutes on 2
		// busy cores (TestArchives covers the zip); make release builds all six.
		platforms = "linux/" + runtime.GOARCH
	}
	archs := os.Getenv(ImageArchsEnv)
	if archs == "" {
		archs = "amd64,arm64"
	}
	dist := filepath.Join(t.TempDir(), "dist")
	start := time.Now()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "release", "VERSION="+testVersion, "DIST="+dist,
		"HELM_BIN="+helm, "KUBECTL_BIN="+kubectl, "RELEASE_PLUGIN_PLATFORMS="+platforms, "RELEASE_IMAGE_ARCHS="+archs)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	t.Logf("make release VERSION=%s (image %s, plugins %s) in %s:\n%s", testVersion, archs, platforms, time.Since(start).Round(time.Second), tail(out, 30))
	if err != nil {
		t.Fatalf("make release: %v", err)
	}

	ref := strings.TrimSpace(readText(t, filepath.Join(dist, "image.txt")))
	repository, digest, _ := strings.Cut(ref, "@")
	repository = strings.TrimSuffix(repository, ":"+testVersion)
	if repository != "ghcr.io/example/"+ImageName || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("image.txt: %s", ref)
	}
	rootfs := checkImageIndex(t, dist, repository, digest, archs)
	checkChecksums(t, dist)
	checkKrew(t, dist, platforms)
	krewValidates(ctx, t, root, dist)
	h := chart.Helm{Bin: helm, Home: t.TempDir()}
	chartPackage := filepath.Join(dist, ChartName+"-"+strings.TrimPrefix(testVersion, "v")+".tgz")
	checkPins(t, h, dist, chartPackage, ref)

	// The local node runs the image unpacked from the release's archive, as a node that
	// imported it (ctr images import) would.
	// Its Service network: helm test's Pod reaches the Services by name.
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 1, ExtraArgs: []string{"--exec-image=" + repository + "=" + rootfs, "--service-network"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	kube, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	runPlugin(t, dist, c)
	helmCmd, kubectlCmd := readmeInstall(t, root)
	h.Kubeconfig = c.KubeconfigPath()

	// The chart from its package, as the README's helm install.
	args := localArgs(helmCmd, chartPackage, dist)
	t.Logf("$ %s", strings.Join(args, " "))
	if o, _, err := h.Run(ctx, root, args[1:]...); err != nil {
		t.Fatal(err)
	} else {
		t.Log(o)
	}
	operatorAvailable(t, c, kube)
	// helm test: its Pod, the release's image in check mode, dials the operator's and the
	// adapter's Services by their names through the cluster's Service network, with its
	// mounted ServiceAccount token and the adapter's CA.
	began := time.Now()
	// Without --logs: helm looks for them in the release's namespace, the Pod is in the operator's.
	if o, e, err := h.Run(ctx, root, "test", args[2], "-n", systemNamespace, "--timeout", "3m"); err != nil {
		logs, _, _ := c.Kubectl(ctx, "-n", systemNamespace, "logs", "inferenceservice-operator-test")
		t.Fatalf("helm test %s: %v\n%s\n%s\nthe Pod's log:\n%s", args[2], err, o, e, logs)
	} else {
		t.Logf("$ helm test %s (%s)\n%s", args[2], time.Since(began).Round(time.Second), o)
	}
	// And it fails when the operator does not answer: its Pod stays, and its log names the
	// URL that failed and the one that answered, each dialled by its Service's name.
	if _, _, err := c.Kubectl(ctx, "-n", systemNamespace, "scale", "deployment", "inferenceservice-operator", "--replicas=0"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the operator's pods gone", func() error {
		pods, err := kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=inferenceservice-operator"})
		if err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%d pods (%v)", len(pods.Items), err)
		}
		return nil
	})
	if o, _, err := h.Run(ctx, root, "test", args[2], "-n", systemNamespace, "--timeout", "3m"); err == nil {
		t.Fatalf("helm test passed with the operator scaled to 0:\n%s", o)
	}
	logs, _, err := c.Kubectl(ctx, "-n", systemNamespace, "logs", "inferenceservice-operator-test")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"FAIL https://inferenceservice-operator-metrics." + systemNamespace + ".svc:8443/metrics",
		"ok   https://inferenceservice-metrics-adapter." + systemNamespace + ".svc:443/readyz: 200",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("helm test's Pod log lacks %q:\n%s", want, logs)
		}
	}
	t.Logf("helm test with the operator scaled to 0 fails; its Pod's log:\n%s", logs)
	if _, _, err := h.Run(ctx, root, "uninstall", args[2], "-n", systemNamespace, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	// helm leaves the release's namespace (--create-namespace made it); the manifests below
	// make it again.
	if err := kube.CoreV1().Namespaces().Delete(ctx, systemNamespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, "namespace "+systemNamespace+" gone after helm uninstall", func() error {
		_, err := kube.CoreV1().Namespaces().Get(ctx, systemNamespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})

	// The manifests, as the README's kubectl apply.
	args = localArgs(kubectlCmd, chartPackage, dist)
	t.Logf("$ %s", strings.Join(args, " "))
	if o, _, err := c.Kubectl(ctx, args[1:]...); err != nil {
		t.Fatal(err)
	} else {
		t.Log(o)
	}
	operatorAvailable(t, c, kube)
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readText(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkImageIndex reads the archive back: one entry, the index named by version and full
// name, whose digest is the pinned one, listing linux/amd64 and linux/arm64, each image's
// config saying the same and holding the three binaries. It returns the host platform's
// image unpacked (config.json and rootfs/) for the local kubelet.
func checkImageIndex(t *testing.T, dist, repository, digest, archs string) string {
	t.Helper()
	dir := t.TempDir()
	if err := oci.Untar(filepath.Join(dist, ImageArchive(testVersion)), filepath.Join(dir, "layout")); err != nil {
		t.Fatal(err)
	}
	top, err := layout.ImageIndexFromPath(filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want the release's index", len(tm.Manifests))
	}
	d := tm.Manifests[0]
	if d.MediaType != types.OCIImageIndex || d.Digest.String() != digest ||
		d.Annotations["org.opencontainers.image.ref.name"] != testVersion || d.Annotations["io.containerd.image.name"] != repository+":"+testVersion {
		t.Fatalf("index.json entry %+v, want an OCI index %s named %s:%s", d, digest, repository, testVersion)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	var host v1.Image
	for _, m := range im.Manifests {
		if m.Platform == nil {
			t.Fatalf("manifest %s without a platform", m.Digest)
		}
		listed = append(listed, m.Platform.OS+"/"+m.Platform.Architecture)
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != m.Platform.OS || cf.Architecture != m.Platform.Architecture {
			t.Errorf("%s: the config says %s/%s", m.Digest, cf.OS, cf.Architecture)
		}
		if len(cf.Config.Entrypoint) != 1 || cf.Config.Labels["org.opencontainers.image.version"] != testVersion {
			t.Errorf("%s/%s config: entrypoint %v, labels %v", cf.OS, cf.Architecture, cf.Config.Entrypoint, cf.Config.Labels)
		}
		if m.Platform.Architecture == runtime.GOARCH {
			host = img
		}
	}
	sort.Strings(listed)
	var want []string
	for _, a := range strings.Split(archs, ",") {
		want = append(want, "linux/"+a)
	}
	sort.Strings(want)
	if strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Fatalf("the index lists %v, want %v", listed, want)
	}
	t.Logf("image %s@%s: %v", repository, digest, listed)
	if host == nil {
		t.Fatalf("no image for the host's %s", runtime.GOARCH)
	}
	ctrImport(t, dist, dir, repository, digest)
	return unpack(t, skopeoCopy(t, dist, dir, digest), filepath.Join(dir, "image"))
}

// readmeTool returns the README's command that re matches, split into words, once the tools
// it needs (from the Debian package pkg) are found.
func readmeTool(t *testing.T, re *regexp.Regexp, pkg string, tools ...string) []string {
	t.Helper()
	for _, bin := range tools {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is needed to load the release's archive as the README says (apt-get install %s; .ci/run installs it)", bin, pkg)
		}
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	m := re.FindStringSubmatch(readText(t, filepath.Join(root, "README.md")))
	if m == nil {
		t.Fatalf("README.md has no command matching %s", re)
	}
	return strings.Fields(m[1])
}

// readmeCtrRE is the README's ctr command, which loads the archive onto a node.
var readmeCtrRE = regexp.MustCompile("`(ctr [^`]+ images import [^`]+)`")

// ctrImport runs the README's ctr import of the archive, as written, against a containerd of
// its own (root and socket in dir), and checks the README's promise: the image keeps its name
// and its index's digest, so the chart's and the manifests' pinned reference finds it.
func ctrImport(t *testing.T, dist, dir, repository, digest string) {
	t.Helper()
	args := readmeTool(t, readmeCtrRE, "containerd", "containerd", "ctr")
	cd := filepath.Join(dir, "containerd")
	sock := filepath.Join(cd, "containerd.sock")
	config := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\n[grpc]\n  address = %q\n[ttrpc]\n  address = %q\n",
		filepath.Join(cd, "root"), filepath.Join(cd, "state"), sock, filepath.Join(cd, "ttrpc.sock"))
	if err := os.MkdirAll(cd, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cd, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Ctx(t, 5*time.Minute)
	daemon := exec.Command("containerd", "--config", filepath.Join(cd, "config.toml"))
	var log bytes.Buffer
	daemon.Stdout, daemon.Stderr = &log, &log
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }()
	ctr := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	testenv.Eventually(t, time.Minute, "containerd answering", func() error {
		_, err := ctr("version")
		return err
	})
	for i, a := range args {
		if strings.HasSuffix(a, ".oci.tar") {
			args[i] = filepath.Join(dist, ImageArchive(testVersion))
		}
	}
	if out, err := ctr(args[1:]...); err != nil {
		t.Fatalf("$ %s: %v\n%s\ncontainerd:\n%s", strings.Join(args, " "), err, out, tail(log.Bytes(), 20))
	}
	ns := "default"
	for i, a := range args {
		if (a == "-n" || a == "--namespace") && i+1 < len(args) {
			ns = args[i+1]
		}
	}
	out, err := ctr("-n", ns, "images", "ls")
	if err != nil {
		t.Fatal(err)
	}
	want := repository + ":" + testVersion
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == want {
			if f[2] != digest {
				t.Fatalf("ctr images ls: %s has digest %s, want %s", want, f[2], digest)
			}
			t.Logf("$ %s -> %s %s", strings.Join(args, " "), f[0], f[2])
			return
		}
	}
	t.Fatalf("ctr images ls after the import has no %s:\n%s", want, out)
}

// readmeSkopeoRE is the README's skopeo command, which loads the archive into a registry.
var readmeSkopeoRE = regexp.MustCompile("`(skopeo copy [^`]+)`")

// skopeoCopy runs the README's skopeo copy of the archive (its flags as written; the
// destination an OCI layout here instead of docker://, as no registry runs), checks the copy
// kept the index's digest and returns the host's image from the copy, which the local kubelet
// then runs: the image as a cluster that loaded it that way holds it.
func skopeoCopy(t *testing.T, dist, dir, digest string) v1.Image {
	t.Helper()
	args := readmeTool(t, readmeSkopeoRE, "skopeo", "skopeo")
	dest := filepath.Join(dir, "skopeo")
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "oci-archive:"):
			args[i] = "oci-archive:" + filepath.Join(dist, ImageArchive(testVersion))
		case strings.HasPrefix(a, "docker://"):
			args[i] = "oci:" + dest + ":" + testVersion
		}
	}
	ctx := testenv.Ctx(t, 5*time.Minute)
	if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("$ %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("$ %s", strings.Join(args, " "))
	copied, err := layout.ImageIndexFromPath(dest)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := copied.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Manifests) != 1 || cm.Manifests[0].Digest.String() != digest {
		t.Fatalf("skopeo's copy lists %+v, want the index %s (--preserve-digests)", cm.Manifests, digest)
	}
	idx, err := copied.ImageIndex(cm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("skopeo's copy has no linux/%s image", runtime.GOARCH)
	return nil
}

// unpack writes img's configuration and its layers applied, as a node keeps a pulled image.
func unpack(t *testing.T, img v1.Image, dir string) string {
	t.Helper()
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var bins []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "rootfs", filepath.FromSlash(path.Clean("/"+h.Name)))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, os.FileMode(h.Mode).Perm())
			}
			if h.Mode&0o111 != 0 {
				bins = append(bins, h.Name)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(bins)
	if strings.Join(bins, " ") != "inferenceservice-activator inferenceservice-metrics-adapter inferenceservice-operator" {
		t.Fatalf("executables in the image: %v", bins)
	}
	return dir
}

// checkChecksums: checksums.txt lists every other file of the release, with its sha256.
func checkChecksums(t *testing.T, dist string) {
	t.Helper()
	listed := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(readText(t, filepath.Join(dist, "checksums.txt"))))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(dist, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(SHA256(b)); got != sum {
			t.Errorf("%s: sha256 %s, checksums.txt says %s", name, got, sum)
		}
		listed[name] = true
	}
	err := filepath.Walk(dist, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dist, p)
		if strings.Contains(filepath.ToSlash(rel), "/") {
			t.Errorf("%s is in a subfolder: the forge attaches files, not folders", rel)
		}
		if rel = filepath.ToSlash(rel); rel != "checksums.txt" && !listed[rel] {
			t.Errorf("%s is not in checksums.txt", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// As a user checks the downloads: every name is a file of the one folder the forge serves.
	cmd := exec.Command("sha256sum", "--check", "--strict", "checksums.txt")
	cmd.Dir = dist
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check in the release folder: %v\n%s", err, out)
	}
	t.Logf("checksums.txt: %d files, each matching, sha256sum --check agrees", len(listed))
}

// checkKrew: one platform per archive built, its uri the forge's download of it, its sha256
// the archive's, and its bin inside the archive.
func checkKrew(t *testing.T, dist, platforms string) {
	t.Helper()
	var m struct {
		Spec struct{ Platforms []krewPlatform }
	}
	if err := yaml.Unmarshal([]byte(readText(t, filepath.Join(dist, KrewFile))), &m); err != nil {
		t.Fatal(err)
	}
	want, err := ParsePlatforms(platforms)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != len(want) {
		t.Fatalf("krew lists %d platforms, %d built", len(m.Spec.Platforms), len(want))
	}
	for _, kp := range m.Spec.Platforms {
		name := path.Base(kp.URI)
		if kp.URI != Homepage+"/releases/download/"+testVersion+"/"+name {
			t.Errorf("uri %s", kp.URI)
		}
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(SHA256(b)); got != kp.SHA256 {
			t.Errorf("%s: sha256 %s, krew says %s", name, got, kp.SHA256)
		}
		files := archiveFiles(t, name, b)
		if _, ok := files[kp.Bin]; !ok {
			t.Errorf("%s holds %v, not its bin %s", name, keys(files), kp.Bin)
		}
	}
}

// KrewBinEnv names krew (kubectl-krew) built by test/krew/build.sh, validate-krew-manifest
// next to it; unset, the test builds them.
const KrewBinEnv = "KREW_BIN"

// krewValidates checks the release's krew manifest with krew's own tools, as a submission to
// krew-index is checked: validate-krew-manifest on it under the name krew-index gives it
// (plugins/isvc.yaml), then krew install of each platform from its archive in the release
// (--archive: krew checks the archive's sha256 against the manifest, unpacks it and links the
// bin), which must leave the LICENSE krew-index requires among the installed files.
func krewValidates(ctx context.Context, t *testing.T, root, dist string) {
	t.Helper()
	krew := os.Getenv(KrewBinEnv)
	if krew == "" {
		krew = filepath.Join(root, "test", "krew", "bin", "krew")
		if out, err := exec.CommandContext(ctx, filepath.Join(root, "test", "krew", "build.sh"), krew).CombinedOutput(); err != nil {
			t.Fatalf("test/krew/build.sh: %v\n%s", err, out)
		}
	}
	var m struct {
		Metadata struct{ Name string }
		Spec     struct {
			Version   string
			Platforms []krewPlatform
		}
	}
	manifest := readText(t, filepath.Join(dist, KrewFile))
	if err := yaml.Unmarshal([]byte(manifest), &m); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(t.TempDir(), m.Metadata.Name+".yaml")
	if err := os.WriteFile(index, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	validate := filepath.Join(filepath.Dir(krew), "validate-krew-manifest")
	if out, err := exec.CommandContext(ctx, validate, "-manifest", index, "-skip-install").CombinedOutput(); err != nil {
		t.Fatalf("validate-krew-manifest: %v\n%s", err, out)
	}
	for _, kp := range m.Spec.Platforms {
		goos, arch := kp.Selector.MatchLabels["os"], kp.Selector.MatchLabels["arch"]
		krewRoot := t.TempDir()
		cmd := exec.CommandContext(ctx, krew, "install", "--manifest="+index, "--archive="+filepath.Join(dist, path.Base(kp.URI)))
		cmd.Env = []string{"KREW_ROOT=" + krewRoot, "KREW_OS=" + goos, "KREW_ARCH=" + arch, "HOME=" + krewRoot, "PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("krew install %s/%s: %v\n%s", goos, arch, err, out)
		}
		installed := readDirNames(t, filepath.Join(krewRoot, "store", m.Metadata.Name, m.Spec.Version))
		if !slices.Contains(installed, "LICENSE") || !slices.Contains(installed, kp.Bin) {
			t.Errorf("krew installed %v for %s/%s: krew-index wants the LICENSE beside the bin %s", installed, goos, arch, kp.Bin)
		}
		t.Logf("krew install --manifest=%s --archive=%s (%s/%s): %v", path.Base(index), path.Base(kp.URI), goos, arch, installed)
	}
	t.Logf("validate-krew-manifest -manifest %s: structural validation, platforms, selectors OK", path.Base(index))
}

// readDirNames lists dir's entries.
func readDirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// archiveFiles reads a plugin archive (tar.gz or zip) into name -> content.
func archiveFiles(t *testing.T, name string, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	if strings.HasSuffix(name, ".zip") {
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			files[f.Name], err = io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		return files
	}
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// imageRE finds container images in rendered YAML.
var imageRE = regexp.MustCompile(`(?m)^\s*(?:- )?image: "?([^"\s]+)"?\s*$`)

// checkPins: the packaged chart has the release's version and appVersion, and every image it
// renders is the pinned ref; install.yaml's images are exactly the same, crds.yaml only CRDs.
func checkPins(t *testing.T, h chart.Helm, dist, pkg, ref string) {
	t.Helper()
	ctx := testenv.Ctx(t, 2*time.Minute)
	show, _, err := h.Run(ctx, dist, "show", "chart", pkg)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal([]byte(show), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != strings.TrimPrefix(testVersion, "v") || meta.AppVersion != testVersion {
		t.Errorf("chart version %s, appVersion %s", meta.Version, meta.AppVersion)
	}
	rendered, _, err := h.Run(ctx, dist, "template", "isvc", pkg)
	if err != nil {
		t.Fatal(err)
	}
	chartImages := images(rendered)
	manifestImages := images(readText(t, filepath.Join(dist, "install.yaml")))
	if len(chartImages) != 1 || chartImages[0] != ref {
		t.Errorf("the chart renders images %v, want only %s", chartImages, ref)
	}
	if strings.Join(manifestImages, ",") != strings.Join(chartImages, ",") {
		t.Errorf("install.yaml runs %v, the chart %v", manifestImages, chartImages)
	}
	crds, _, err := SplitCRDs(readText(t, filepath.Join(dist, "crds.yaml")) + "---\nkind: Namespace\n")
	if err != nil || strings.Count(crds, "kind: CustomResourceDefinition") == 0 {
		t.Errorf("crds.yaml: %v", err)
	}
	if strings.Contains(readText(t, filepath.Join(dist, "install.yaml")), "kind: CustomResourceDefinition") {
		t.Error("install.yaml holds a CRD")
	}
	t.Logf("chart %s (appVersion %s) and install.yaml run %v", meta.Version, meta.AppVersion, chartImages)
}

// images is the set of images in rendered YAML, sorted.
func images(rendered string) []string {
	set := map[string]bool{}
	for _, m := range imageRE.FindAllStringSubmatch(rendered, -1) {
		set[m[1]] = true
	}
	var out []string
	for i := range set {
		out = append(out, i)
	}
	sort.Strings(out)
	return out
}

// runPlugin runs the host's plugin from its archive against the cluster: its version is the
// release's.
func runPlugin(t *testing.T, dist string, c *cluster.Cluster) {
	t.Helper()
	p := Platform{"linux", runtime.GOARCH}
	b, err := os.ReadFile(filepath.Join(dist, PluginArchive(testVersion, p)))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), PluginBinary(p))
	if err := os.WriteFile(bin, archiveFiles(t, "x.tar.gz", b)[PluginBinary(p)], 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testenv.Ctx(t, time.Minute), bin, "version", "--kubeconfig", c.KubeconfigPath())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Client Version: "+testVersion+"\n") {
		t.Fatalf("kubectl-isvc version: %v\n%s", err, out)
	}
	t.Logf("$ kubectl-isvc version\n%s", out)
}

// readmeInstall is the README's two install commands, from the first sh block of its install
// section: the helm install and the kubectl apply.
func readmeInstall(t *testing.T, root string) (helmCmd, kubectlCmd string) {
	t.Helper()
	readme := readText(t, filepath.Join(root, "README.md"))
	_, section, ok := strings.Cut(readme, "\n## Install on your cluster\n")
	if !ok {
		t.Fatal("README.md has no install section")
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README.md's install section has no sh block")
	}
	for _, l := range strings.Split(block, "\n") {
		l, _, _ = strings.Cut(l, "#")
		switch l = strings.TrimSpace(l); {
		case strings.HasPrefix(l, "helm install "):
			helmCmd = l
		case strings.HasPrefix(l, "kubectl apply "):
			kubectlCmd = l
		}
	}
	if helmCmd == "" || kubectlCmd == "" {
		t.Fatalf("README.md's install block lacks a helm install or a kubectl apply:\n%s", block)
	}
	return helmCmd, kubectlCmd
}

var (
	chartURLRE    = regexp.MustCompile(`oci://ghcr\.io/example/charts/` + ChartName + ` --version \S+`)
	downloadURLRE = regexp.MustCompile(regexp.QuoteMeta(Homepage) + `/releases/download/[^/\s]+/`)
)

// localArgs is a README command with the release's addresses replaced by its files here.
func localArgs(command, chartPackage, dist string) []string {
	command = chartURLRE.ReplaceAllLiteralString(command, chartPackage)
	command = downloadURLRE.ReplaceAllLiteralString(command, dist+"/")
	return strings.Fields(command)
}

// operatorAvailable adapts the install to the local node, then waits for the operator's and the
// metrics adapter's Deployments to be Available. The local node runs every pod in its one
// network namespace, where the operator's :8081 would collide with the activator's podIP:8081,
// so the operator and the adapter bind their pod IP as the activator does; every Deployment
// runs one replica (a standby's readiness and failover are test/incluster's). Nothing else is
// changed: the Service network mounts the pods' volumes, so the adapter writes its serving
// certificate into its emptyDir and the operator reads its Lease's namespace from its
// ServiceAccount files, as in a cluster.
func operatorAvailable(t *testing.T, c *cluster.Cluster, kube kubernetes.Interface) {
	t.Helper()
	ctx := testenv.Ctx(t, 5*time.Minute)
	adapt := func(args ...string) string {
		patch := `[{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"POD_IP","valueFrom":{"fieldRef":{"fieldPath":"status.podIP"}}}}`
		for _, a := range args {
			patch += `,{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"` + a + `"}`
		}
		return patch + "]"
	}
	for _, args := range [][]string{
		{"-n", systemNamespace, "scale", "deployment", "--all", "--replicas=1"},
		{"-n", systemNamespace, "patch", "deployment", "inferenceservice-operator", "--type=json", "-p",
			adapt("--metrics-bind-address=$(POD_IP):8443", "--health-probe-bind-address=$(POD_IP):8081")},
		{"-n", systemNamespace, "patch", "deployment", adapterName, "--type=json", "-p", adapt("--bind-address=$(POD_IP)")},
	} {
		if _, _, err := c.Kubectl(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	defer func() {
		if t.Failed() { // what a user would look at next: the pods, their Events and logs
			ctx := context.Background()
			out, _, _ := c.Kubectl(ctx, "-n", systemNamespace, "get", "pods", "-o", "wide")
			t.Log(out)
			out, _, _ = c.Kubectl(ctx, "-n", systemNamespace, "get", "events", "--field-selector=type=Warning")
			t.Log(out)
			for _, name := range []string{"inferenceservice-operator", adapterName} {
				out, stderr, _ := c.Kubectl(ctx, "-n", systemNamespace, "logs", "deployment/"+name, "--tail=10")
				t.Logf("deployment/%s's log:\n%s%s", name, out, stderr)
			}
		}
	}()
	for _, name := range []string{"inferenceservice-operator", adapterName} {
		var d *appsv1.Deployment
		testenv.Eventually(t, 4*time.Minute, name+" Available", func() error {
			var err error
			if d, err = kube.AppsV1().Deployments(systemNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
			if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 1 || d.Status.AvailableReplicas != 1 || d.Status.Replicas != 1 {
				return fmt.Errorf("status %+v", d.Status)
			}
			for _, cond := range d.Status.Conditions {
				if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", d.Status.Conditions)
		})
		logs, _, _ := c.Kubectl(ctx, "-n", systemNamespace, "logs", "deployment/"+name, "--tail=5")
		t.Logf("%s Available %s after the adaptation, image %s:\n%s", name, time.Since(start).Round(time.Second), d.Spec.Template.Spec.Containers[0].Image, logs)
	}
	pods, _, _ := c.Kubectl(ctx, "-n", systemNamespace, "get", "pods,deployments", "-o", "wide")
	t.Log(pods)
}

// adapterName is the metrics adapter's Deployment in both installs.
const adapterName = "inferenceservice-metrics-adapter"
