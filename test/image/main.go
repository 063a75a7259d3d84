// Command image builds the operator's OCI image without Docker: the static binary as the only
// layer on an empty base, entrypoint /inferenceservice-operator, user 65532:65532 and the
// org.opencontainers.image.* labels, written as an OCI image layout tarball (an "oci-archive")
// that skopeo, podman, crane or containerd import:
//
//	go run ./test/image -version v0.1.0 -o bin/inferenceservice-operator.oci.tar
//	skopeo copy oci-archive:bin/inferenceservice-operator.oci.tar docker://registry.example.com/isvc-operator:v0.1.0
//
// The Dockerfile at the repository root builds the same image for users with Docker; the
// builder is test/image/oci, which make release (test/release) uses for both platforms.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/example/inferenceservice-operator/test/image/oci"
)

func main() {
	var o oci.Options
	flag.StringVar(&o.Output, "o", "bin/inferenceservice-operator.oci.tar", "Output OCI layout tarball.")
	flag.StringVar(&o.Binary, "binary", "", "A prebuilt static operator binary; empty builds one (CGO_ENABLED=0) from the repository.")
	flag.StringVar(&o.Version, "version", "dev", "Image version: the org.opencontainers.image.version label, the ref name, and main.version when building.")
	flag.StringVar(&o.Source, "source", oci.DefaultSource, "The org.opencontainers.image.source label.")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "GOARCH of the binary and the image.")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to add at the same path (for an HTTPS --gateway-url); empty or missing skips it.")
	flag.Parse()
	digest, err := oci.Build(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%s)\n", o.Output, digest)
}
