#!/usr/bin/env bash
# Builds, from sigs.k8s.io/gateway-api-inference-extension at the version go.mod pins (v1.5.0,
# the full endpoint picker), two binaries next to each other:
#   epp      the endpoint picker: cmd/epp's flags and scheduling through this module's own main
#            (picker/), its listeners on $LOCALCLUSTER_POD_IP or 127.0.0.1 (see README.md);
#   gateway  a minimal Gateway API data plane (gateway/): HTTPRoutes (ReferenceGrants checked) to Services and to
#            InferencePools through their picker over ext_proc.
# and copies the CRDs the harness applies to <epp>-manifests/crd: InferencePool
# (inference.networking.k8s.io/v1, from the module) and the HTTPRoute and ReferenceGrant stand-ins
# (gateway/httproute-crd.yaml); the optional x-k8s CRDs (InferenceObjective,
# InferenceModelRewrite, InferencePoolImport) go to <epp>-manifests/crd-optional.
# The build is skipped while a stamp of its inputs (go.mod, go.sum, picker/, gateway/, this
# script, the Go version) matches the one written next to the binary.
# No -trimpath, CGO off: the flags test/localcluster/build.sh and test/kueue build with.
# Usage: test/epp/build.sh [output]   (default test/epp/bin/epp; the gateway is its sibling)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/epp}"
mkdir -p "$(dirname "$out")"
gw="$(dirname "$out")/gateway"
export GOWORK=off CGO_ENABLED=0
# Two callers (make, a test run by hand) must not build into the same path at once.
exec 9>"$out.lock"
flock 9
stamp="$( (cat go.mod go.sum build.sh picker/*.go gateway/*.go gateway/*.yaml; go version) | sha256sum | cut -d' ' -f1)"
manifests="$out-manifests"
if [ -x "$out" ] && [ -x "$gw" ] && [ -d "$manifests/crd" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$out $gw (up to date)"
  exit 0
fi
mod=sigs.k8s.io/gateway-api-inference-extension
../buildprogress/buildprogress.sh epp go build -o "$out" ./picker
go build -o "$gw" ./gateway
src="$(go list -m -f '{{.Dir}}' "$mod")"
rm -rf "$manifests"
mkdir -p "$manifests/crd" "$manifests/crd-optional"
# The module cache is read-only; install gives the copies a mode later builds can replace.
install -m 0644 "$src"/config/crd/bases/inference.networking.k8s.io_*.yaml gateway/httproute-crd.yaml gateway/referencegrant-crd.yaml "$manifests/crd/"
install -m 0644 "$src"/config/crd/bases/inference.networking.x-k8s.io_*.yaml "$manifests/crd-optional/"
echo "$stamp" > "$out.stamp"
echo "$out"
echo "$gw"
