// Package oci builds the operator's OCI image without Docker, for make image (test/image, one
// platform) and make release (test/release, one index of linux/amd64 and linux/arm64).
package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/example/inferenceservice-operator/test/buildprogress"
	"github.com/example/inferenceservice-operator/test/cluster"
)

// Image facts shared with the Dockerfile and the manifests.
const (
	Entrypoint = "/inferenceservice-operator"
	// AdapterPath is the image's second binary, the metrics adapter (manifests/metrics-adapter).
	AdapterPath = "/inferenceservice-metrics-adapter"
	// ActivatorPath is its third, the activator (manifests/activator).
	ActivatorPath = "/inferenceservice-activator"
	User          = "65532:65532"
	Title         = "inferenceservice-operator"
	DefaultSource = "https://github.com/example/inferenceservice-operator"
)

// Options of one image build.
type Options struct {
	Output, Binary, Version, Source, Arch, CACerts string
	// Adapter is a prebuilt metrics adapter binary; empty builds one with the operator.
	Adapter string
	// Activator is a prebuilt activator binary; empty builds one with the operator.
	Activator string
	// Name, when set, is the image's full name (registry/repository:tag) in the layout's
	// io.containerd.image.name annotation, which `ctr images import` names the image by
	// (org.opencontainers.image.ref.name holds only the tag).
	Name string
}

// epoch stamps every file and the config, so the same binary gives the same digest.
var epoch = time.Unix(0, 0).UTC()

// Build writes the image as an OCI layout tarball at o.Output and returns its digest.
func Build(ctx context.Context, o Options) (v1.Hash, error) {
	img, err := build(ctx, o)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := writeOCIArchive(o, func(p layout.Path, opt layout.Option) error { return p.AppendImage(img, opt) }); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// build compiles the binaries o does not name, for o.Arch, and makes the image.
func build(ctx context.Context, o Options) (v1.Image, error) {
	bin := o.Binary
	if bin == "" || o.Adapter == "" || o.Activator == "" {
		dir, err := os.MkdirTemp("", "image-build-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if bin == "" {
			if bin, err = compile(ctx, dir, o.Version, o.Arch, "."); err != nil {
				return nil, err
			}
		}
		if o.Adapter == "" {
			if o.Adapter, err = compile(ctx, dir, o.Version, o.Arch, "./metrics/adapter"); err != nil {
				return nil, err
			}
		}
		if o.Activator == "" {
			if o.Activator, err = compile(ctx, dir, o.Version, o.Arch, "./controller/activator/cmd"); err != nil {
				return nil, err
			}
		}
	}
	// Image reads the binaries into memory, so the temporary directory may go.
	return Image(bin, o)
}

// Platforms builds the image for each of archs (linux) and writes one OCI image index listing
// them, each with its platform, as an OCI layout tarball at o.Output; o's binaries are ignored
// (each platform compiles its own). It returns the index's digest, which pins every platform.
func Platforms(ctx context.Context, o Options, archs []string) (v1.Hash, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range archs {
		po := o
		po.Arch, po.Binary, po.Adapter, po.Activator = arch, "", "", ""
		img, err := build(ctx, po)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("linux/%s: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: imageOnly{img}, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
	}
	// The index itself carries the version, as buildx's OCI output does: the layout's one entry.
	if err := writeOCIArchive(o, func(p layout.Path, opt layout.Option) error { return p.AppendIndex(idx, opt) }); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// compile builds a static binary of the package pkg (no cgo: no libc needed on an empty base).
func compile(ctx context.Context, dir, version, arch, pkg string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, strings.NewReplacer(".", "", "/", "-").Replace(pkg)+"bin")
	env := buildprogress.Env("CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if err := buildprogress.Build(ctx, filepath.Base(out), root, env, os.Stderr, "-ldflags", "-s -w -X main.version="+version, "-o", out, pkg); err != nil {
		return "", err
	}
	return out, nil
}

// Image is the binary as one layer on an empty base, with the runtime config.
func Image(bin string, o Options) (v1.Image, error) {
	layer, err := binaryLayer(bin, o.Adapter, o.Activator, o.CACerts)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.User = User
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.source":  o.Source,
		"org.opencontainers.image.version": o.Version,
		"org.opencontainers.image.title":   Title,
	}
	return mutate.ConfigFile(img, cf)
}

// binaryLayer is a tar holding the executables at Entrypoint, AdapterPath and ActivatorPath
// (root-owned, 0755, so the non-root user runs but cannot change them) and, when present, the
// CA bundle.
func binaryLayer(bin, adapter, activator, caCerts string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(src, dst string, mode int64) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dst, "/"), Mode: mode, Size: int64(len(b)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	}
	if err := add(bin, Entrypoint, 0o755); err != nil {
		return nil, err
	}
	if adapter != "" {
		if err := add(adapter, AdapterPath, 0o755); err != nil {
			return nil, err
		}
	}
	if activator != "" {
		if err := add(activator, ActivatorPath, 0o755); err != nil {
			return nil, err
		}
	}
	if caCerts != "" {
		if _, err := os.Stat(caCerts); err == nil {
			if err := mkdirs(tw, filepath.Dir(caCerts)); err != nil {
				return nil, err
			}
			if err := add(caCerts, caCerts, 0o644); err != nil {
				return nil, err
			}
		} else if !os.IsNotExist(err) {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// mkdirs writes directory entries for dir and its parents, outermost first.
func mkdirs(tw *tar.Writer, dir string) error {
	var dirs []string
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return nil
}

// writeOCIArchive writes one entry (an image or an index, added by add with the ref name
// annotation) into an OCI image layout and tars that directory to out.
func writeOCIArchive(o Options, add func(layout.Path, layout.Option) error) error {
	out := o.Output
	annotations := map[string]string{"org.opencontainers.image.ref.name": o.Version}
	if o.Name != "" {
		annotations["io.containerd.image.name"] = o.Name
	}
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := add(p, layout.WithAnnotations(annotations)); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: epoch})
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// imageOnly is an image whose index descriptor has no artifactType: go-containerregistry sets
// it to the config's media type, which skopeo 1.9 (Debian 12's) drops when it reads the index,
// so its copy --all --preserve-digests of the release refuses ("Manifest list must be
// converted ... Instructed to preserve digests"). An image needs none (image-spec 1.1).
type imageOnly struct{ v1.Image }

func (imageOnly) ArtifactType() (string, error) { return "", nil }
