package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestBuild builds the operator and its image, then reads the OCI layout back: an OCI
// manifest, the config's entrypoint, user and labels, and one layer holding the static
// executable with mode 0755.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the operator")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "operator.oci.tar")
	bin, err := compile(context.Background(), dir, "v0.0.1-test", "amd64", ".")
	if err != nil {
		t.Fatal(err)
	}
	adapter, err := compile(context.Background(), dir, "v0.0.1-test", "amd64", "./metrics/adapter")
	if err != nil {
		t.Fatal(err)
	}
	activator, err := compile(context.Background(), dir, "v0.0.1-test", "amd64", "./controller/activator/cmd")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Output: out, Binary: bin, Adapter: adapter, Activator: activator, Version: "v0.0.1-test", Source: DefaultSource, Arch: "amd64", CACerts: ""}
	digest, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(out)
	t.Logf("built %s: %s, %d bytes", out, digest, st.Size())

	layoutDir := filepath.Join(dir, "layout")
	if err := Untar(out, layoutDir); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != o.Version {
		t.Fatalf("index manifests %+v", im.Manifests)
	}
	if im.Manifests[0].Digest != digest {
		t.Fatalf("index digest %s, built %s", im.Manifests[0].Digest, digest)
	}
	img, err := idx.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Fatalf("manifest media type %s", mt)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/inferenceservice-operator" {
		t.Errorf("entrypoint %v", got)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q", cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":  DefaultSource,
		"org.opencontainers.image.version": o.Version,
		"org.opencontainers.image.title":   "inferenceservice-operator",
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 on an empty base", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s", mt)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	found := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "inferenceservice-operator" && h.Name != "inferenceservice-metrics-adapter" && h.Name != "inferenceservice-activator" {
			continue
		}
		found[h.Name] = true
		if h.Typeflag != tar.TypeReg || h.FileInfo().Mode().Perm() != 0o755 || h.Uid != 0 {
			t.Errorf("executable: type %c mode %v uid %d", h.Typeflag, h.FileInfo().Mode().Perm(), h.Uid)
		}
		head := make([]byte, 4)
		if _, err := io.ReadFull(tr, head); err != nil || !bytes.Equal(head, []byte("\x7fELF")) {
			t.Errorf("not an ELF executable: %q %v", head, err)
		}
	}
	if !found["inferenceservice-operator"] || !found["inferenceservice-metrics-adapter"] || !found["inferenceservice-activator"] {
		t.Fatalf("executables in the layer: %v, want the operator, the metrics adapter and the activator", found)
	}

	// Reproducible: the same binary gives the same digest.
	again, err := Image(bin, o)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := again.Digest(); err != nil || d != digest {
		t.Fatalf("rebuilt digest %s (%v), first %s", d, err, digest)
	}
}
