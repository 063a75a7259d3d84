// Command release builds one release into one folder (make release VERSION=vX.Y.Z, into
// dist/vX.Y.Z): the image as one OCI index of linux/amd64 and linux/arm64 (an oci-archive), the
// chart packaged with its version and the image pinned by tag and digest, the install manifests
// (crds.yaml apart from install.yaml) with the same pin, the kubectl plugin's archives for each
// platform with a krew manifest, checksums.txt and the release notes. Nothing is pushed: the
// forge's workflow (.github/workflows/release.yaml) pushes what this wrote.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/buildprogress"
	"github.com/example/inferenceservice-operator/test/cluster"
	"github.com/example/inferenceservice-operator/test/image/oci"
)

// Names shared with the workflow, the README and the test.
const (
	ImageName = "inferenceservice-operator"
	ChartName = "inferenceservice-operator"
	Homepage  = "https://github.com/example/inferenceservice-operator"
	// KrewFile is the plugin's krew manifest. The release is one flat folder, as the forge
	// attaches it, so checksums.txt checks with sha256sum -c in the folder of the downloads.
	KrewFile    = "krew-isvc.yaml"
	pluginDir   = "controller/walk/kubectl-isvc"
	chartDir    = "manifests/chart/inferenceservice-operator"
	allPlatform = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64"
)

// ImageArchive is the image's file name in the release.
func ImageArchive(version string) string { return ImageName + "-" + version + ".oci.tar" }

// Options of one release build.
type Options struct {
	Version  string
	Registry string // where the image and chart are pushed, e.g. ghcr.io/example
	Out      string
	Helm     string
	Kubectl  string
	// Download is the forge release's URL prefix the krew manifest and notes point at.
	Download string
	CACerts  string
	Plugins  []Platform
	// ImageArchs are the image's linux platforms: both, always (the index is what a release pins).
	ImageArchs []string
}

var epoch = time.Unix(0, 0).UTC()

func main() {
	var o Options
	var plugins, archs string
	flag.StringVar(&o.Version, "version", "", "The release version, vX.Y.Z.")
	flag.StringVar(&o.Registry, "registry", "ghcr.io/example", "The registry the image is pushed to (REGISTRY/inferenceservice-operator) and its charts (REGISTRY/charts).")
	flag.StringVar(&o.Out, "o", "", "Output folder; empty is dist/VERSION.")
	flag.StringVar(&o.Helm, "helm", "test/helm/bin/helm", "The helm binary that packages the chart.")
	flag.StringVar(&o.Kubectl, "kubectl", "test/kubectl/bin/kubectl", "The kubectl that renders the manifests (kubectl kustomize).")
	flag.StringVar(&o.Download, "download", "", "URL prefix of the release's files; empty is "+Homepage+"/releases/download/VERSION.")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle added to the image (see test/image).")
	flag.StringVar(&plugins, "plugin-platforms", allPlatform, "The plugin's os/arch list.")
	flag.StringVar(&archs, "image-archs", "amd64,arm64", "The image index's linux architectures.")
	flag.Parse()
	var err error
	if o.Plugins, err = ParsePlatforms(plugins); err == nil {
		o.ImageArchs = strings.Split(archs, ",")
		err = Run(context.Background(), o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// Run builds every artifact of o into o.Out, which it empties first.
func Run(ctx context.Context, o Options) error {
	if !versionRE.MatchString(o.Version) {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH", o.Version)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	if o.Out == "" {
		o.Out = filepath.Join(root, "dist", o.Version)
	}
	if o.Download == "" {
		o.Download = Homepage + "/releases/download/" + o.Version
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	step := func(name string, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("release: %s in %s\n", name, time.Since(start).Round(time.Second))
		return nil
	}
	repository := o.Registry + "/" + ImageName
	var digest string
	if err := step("image "+strings.Join(o.ImageArchs, ","), func() error {
		d, err := oci.Platforms(ctx, oci.Options{Output: filepath.Join(o.Out, ImageArchive(o.Version)), Version: o.Version,
			Source: oci.DefaultSource, CACerts: o.CACerts, Name: repository + ":" + o.Version}, o.ImageArchs)
		digest = d.String()
		return err
	}); err != nil {
		return err
	}
	ref := repository + ":" + o.Version + "@" + digest
	if err := step("chart", func() error { return packageChart(ctx, root, tmp, o, repository, digest) }); err != nil {
		return err
	}
	if err := step("manifests", func() error { return renderManifests(ctx, root, tmp, o, repository, digest, ref) }); err != nil {
		return err
	}
	archives := map[Platform][]byte{}
	for _, p := range o.Plugins {
		if err := step("plugin "+p.String(), func() error {
			sum, err := buildPlugin(ctx, root, tmp, o, p)
			archives[p] = sum
			return err
		}); err != nil {
			return err
		}
	}
	krew, err := KrewManifest(o.Version, Homepage, o.Download, archives)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, KrewFile), krew, 0o644); err != nil {
		return err
	}
	if err := step("notes", func() error { return writeNotes(ctx, root, o, ref) }); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "image.txt"), []byte(ref+"\n"), 0o644); err != nil {
		return err
	}
	if err := writeChecksums(o.Out); err != nil {
		return err
	}
	fmt.Printf("release: %s in %s, image %s\n", o.Version, o.Out, ref)
	return nil
}

// run runs a command in dir and returns its stdout; an error carries its stderr.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// copyResolved copies src to dst with symbolic links resolved, as the chart's files/ are.
func copyResolved(ctx context.Context, src, dst string) error {
	_, err := run(ctx, "", nil, "cp", "-rL", src, dst)
	return err
}

func editFile(path string, edit func(string) (string, error)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s, err := edit(string(b))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// packageChart packages a copy of the chart with the pinned image values, the release's
// version (without its v) and appVersion (the image tag).
func packageChart(ctx context.Context, root, tmp string, o Options, repository, digest string) error {
	dir := filepath.Join(tmp, ChartName)
	if err := copyResolved(ctx, filepath.Join(root, chartDir), dir); err != nil {
		return err
	}
	if err := editFile(filepath.Join(dir, "values.yaml"), func(s string) (string, error) { return PinChartValues(s, repository, digest) }); err != nil {
		return err
	}
	helm := o.Helm
	if !filepath.IsAbs(helm) && strings.Contains(helm, "/") {
		helm = filepath.Join(root, helm)
	}
	_, err := run(ctx, tmp, append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(tmp, "helm"), "HELM_CONFIG_HOME="+filepath.Join(tmp, "helm"), "HELM_DATA_HOME="+filepath.Join(tmp, "helm")),
		helm, "package", dir, "--version", strings.TrimPrefix(o.Version, "v"), "--app-version", o.Version, "-d", o.Out)
	return err
}

// renderManifests renders the kustomize default with the image pinned, into crds.yaml and
// install.yaml, and refuses a render where an operator image is not the pinned one.
func renderManifests(ctx context.Context, root, tmp string, o Options, repository, digest, ref string) error {
	dir := filepath.Join(tmp, "manifests")
	if err := copyResolved(ctx, filepath.Join(root, "manifests"), dir); err != nil {
		return err
	}
	if err := editFile(filepath.Join(dir, "kustomization.yaml"), func(s string) (string, error) { return PinImage(s, repository, o.Version, digest) }); err != nil {
		return err
	}
	out, err := run(ctx, tmp, nil, o.Kubectl, "kustomize", dir)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		if img, ok := strings.CutPrefix(strings.TrimSpace(l), "image: "); ok && strings.Contains(img, ImageName) && img != ref {
			return fmt.Errorf("rendered image %s, want %s", img, ref)
		}
	}
	crds, rest, err := SplitCRDs(out)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "crds.yaml"), []byte(crds), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Out, "install.yaml"), []byte(rest), 0o644)
}

// buildPlugin cross-compiles the plugin for p and archives it (with its completion script
// where a shell runs it, and the LICENSE when there is one); it returns the archive's sha256.
func buildPlugin(ctx context.Context, root, tmp string, o Options, p Platform) ([]byte, error) {
	bin := filepath.Join(tmp, "plugin", p.OS+"-"+p.Arch, PluginBinary(p))
	env := buildprogress.Env("CGO_ENABLED=0", "GOWORK=off", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if err := buildprogress.Build(ctx, "kubectl-isvc "+p.String(), filepath.Join(root, pluginDir), env, os.Stderr,
		"-ldflags", "-s -w -X main.version="+o.Version, "-o", bin, "."); err != nil {
		return nil, err
	}
	files := []string{bin}
	if p.OS != "windows" {
		files = append(files, filepath.Join(root, pluginDir, "kubectl_complete-isvc"))
	}
	if _, err := os.Stat(filepath.Join(root, "LICENSE")); err == nil {
		files = append(files, filepath.Join(root, "LICENSE"))
	}
	var data []byte
	var err error
	if p.OS == "windows" {
		data, err = zipFiles(files)
	} else {
		data, err = tarGzFiles(files)
	}
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, PluginArchive(o.Version, p)), data, 0o644); err != nil {
		return nil, err
	}
	return SHA256(data), nil
}

// tarGzFiles archives files flat, executables 0755, stamped at the epoch (the same inputs give
// the same archive).
func tarGzFiles(files []string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		b, st, err := readFile(f)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: filepath.Base(f), Mode: int64(st.Mode().Perm()), Size: int64(len(b)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func zipFiles(files []string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		b, st, err := readFile(f)
		if err != nil {
			return nil, err
		}
		h := &zip.FileHeader{Name: filepath.Base(f), Method: zip.Deflate, Modified: epoch}
		h.SetMode(st.Mode().Perm())
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(b); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func readFile(f string) ([]byte, fs.FileInfo, error) {
	st, err := os.Stat(f)
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(f)
	return b, st, err
}

// writeNotes writes RELEASE_NOTES.md from the log since the previous tag (the whole log when
// there is none), merges left out.
func writeNotes(ctx context.Context, root string, o Options, ref string) error {
	prev, err := run(ctx, root, nil, "git", "describe", "--tags", "--abbrev=0", "--exclude="+o.Version, "HEAD")
	prev = strings.TrimSpace(prev)
	if err != nil {
		prev = "" // no tag before this one
	}
	rng := "HEAD"
	if prev != "" {
		rng = prev + "..HEAD"
	}
	log, err := run(ctx, root, nil, "git", "log", "--no-merges", "--format=%h%x09%s", rng)
	if err != nil {
		return err
	}
	var commits []Commit
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if h, s, ok := strings.Cut(l, "\t"); ok {
			commits = append(commits, Commit{Subject: s, Hash: h})
		}
	}
	notes := ReleaseNotes(o.Version, prev, ref, "oci://"+o.Registry+"/charts/"+ChartName, o.Download, commits)
	return os.WriteFile(filepath.Join(o.Out, "RELEASE_NOTES.md"), []byte(notes), 0o644)
}

// writeChecksums writes checksums.txt over every file in out (paths relative to it).
func writeChecksums(out string) error {
	sums := map[string][]byte{}
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		if rel == "checksums.txt" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sums[filepath.ToSlash(rel)] = SHA256(b)
		return nil
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "checksums.txt"), []byte(Checksums(sums)), 0o644)
}
