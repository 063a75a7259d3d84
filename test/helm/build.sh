#!/usr/bin/env bash
# Builds the helm CLI from the helm.sh/helm/v4 module this folder's go.mod pins, so the chart
# tests run the real tool without a download outside the module proxy. Skips the build when the
# binary is newer than go.mod, go.sum and this script; a lock keeps two callers from building at once.
# Usage: test/helm/build.sh [output]   (default test/helm/bin/helm)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/helm}"
mkdir -p "$(dirname "$out")"
exec 9>"$(dirname "$out")/.build.lock"
flock 9
if [ -x "$out" ] && [ "$out" -nt go.mod ] && [ "$out" -nt go.sum ] && [ "$out" -nt build.sh ]; then
  echo "$out (up to date)"
  exit 0
fi
version=$(GOWORK=off go list -m -f '{{.Version}}' helm.sh/helm/v4)
CGO_ENABLED=0 GOWORK=off ../buildprogress/buildprogress.sh helm go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
  -o "$out.tmp" helm.sh/helm/v4/cmd/helm
mv "$out.tmp" "$out"
echo "$out"
