package oci

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestIndexEntriesHaveNoArtifactType: the index's image entries carry no artifactType, which
// skopeo 1.9 drops when it reads an index and then refuses to copy it with --preserve-digests.
func TestIndexEntriesHaveNoArtifactType(t *testing.T) {
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: imageOnly{img}})
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].ArtifactType != "" {
		t.Fatalf("index entries %+v, want one without artifactType", m.Manifests)
	}
	if d, _ := img.Digest(); m.Manifests[0].Digest != d {
		t.Fatalf("the entry's digest %s is not the image's %s", m.Manifests[0].Digest, d)
	}
}
