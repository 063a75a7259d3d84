#!/usr/bin/env bash
# Builds KServe's controller manager (github.com/kserve/kserve/cmd/manager, at the version in
# go.mod) into bin/manager, as KServe's Dockerfile does (CGO off). Skips the build when the
# binary is newer than go.mod, go.sum and this script: the first build takes minutes on 2 cores.
# Usage: test/kserve/build.sh [output]   (default test/kserve/bin/manager)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/manager}"
if [ -x "$out" ] && [ "$out" -nt go.mod ] && [ "$out" -nt go.sum ] && [ "$out" -nt build.sh ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$(dirname "$out")"
CGO_ENABLED=0 GOWORK=off ../buildprogress/buildprogress.sh kserve go build -o "$out" github.com/kserve/kserve/cmd/manager
echo "$out"
