#!/usr/bin/env bash
# Builds the Gateway API Inference Extension's lightweight endpoint picker (lwepp) from
# sigs.k8s.io/gateway-api-inference-extension at the version go.mod pins, through this module's
# own main (picker/: the module's library parts, its listeners on 127.0.0.1; see README.md),
# and copies, from the same module, the CRDs the harness applies (config/crd/bases:
# InferencePool inference.networking.k8s.io/v1, InferencePoolImport
# inference.networking.x-k8s.io/v1alpha1).
# The build is skipped while a stamp of its inputs (go.mod, go.sum, picker/, this script, the
# Go version) matches the one written next to the binary.
# No -trimpath, CGO off: the flags test/localcluster/build.sh builds with, so the k8s.io
# packages both pin at the same versions come from one build cache entry.
# Usage: test/epp/build.sh [output]   (default test/epp/bin/epp)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/epp}"
mkdir -p "$(dirname "$out")"
export GOWORK=off CGO_ENABLED=0
# Two callers (make, a test run by hand) must not build into the same path at once.
exec 9>"$out.lock"
flock 9
stamp="$( (cat go.mod go.sum build.sh picker/*.go; go version) | sha256sum | cut -d' ' -f1)"
manifests="$out-manifests"
if [ -x "$out" ] && [ -d "$manifests/crd" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$out (up to date)"
  exit 0
fi
mod=sigs.k8s.io/gateway-api-inference-extension
../buildprogress/buildprogress.sh epp go build -o "$out" ./picker
src="$(go list -m -f '{{.Dir}}' "$mod")"
rm -rf "$manifests"
mkdir -p "$manifests/crd"
# The module cache is read-only; install gives the copies a mode later builds can replace.
install -m 0644 "$src"/config/crd/bases/*.yaml "$manifests/crd/"
echo "$stamp" > "$out.stamp"
echo "$out"
