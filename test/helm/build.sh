#!/usr/bin/env bash
# Builds the helm CLI from the helm.sh/helm/v4 module this folder's go.mod pins, so the chart
# tests run the real tool without a download outside the module proxy. Skipped while its inputs
# are unchanged (../buildstamp/buildstamp.sh).
# Usage: test/helm/build.sh [output]   (default test/helm/bin/helm)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/helm}"
. ../buildstamp/buildstamp.sh "$out"
version=$(go list -m -f '{{.Version}}' helm.sh/helm/v4)
../buildprogress/buildprogress.sh helm go build \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
  -o "$out.tmp" helm.sh/helm/v4/cmd/helm
mv "$out.tmp" "$out"
buildstamp_write
echo "$out"
