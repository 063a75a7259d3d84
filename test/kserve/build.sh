#!/usr/bin/env bash
# Builds KServe's controller manager (github.com/kserve/kserve/cmd/manager, at the version in
# go.mod) into bin/manager, as KServe's Dockerfile does (CGO off). Skipped while its inputs are
# unchanged (../buildstamp/buildstamp.sh): the first build takes minutes on 2 cores.
# Usage: test/kserve/build.sh [output]   (default test/kserve/bin/manager)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/manager}"
. ../buildstamp/buildstamp.sh "$out"
../buildprogress/buildprogress.sh kserve go build -o "$out" github.com/kserve/kserve/cmd/manager
buildstamp_write
echo "$out"
