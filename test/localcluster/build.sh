#!/usr/bin/env bash
# Builds the localcluster binary with the same flags the test harness
# (test/cluster.Build) uses, so both share the Go build cache.
# Usage: test/localcluster/build.sh [output]   (default test/localcluster/bin/localcluster)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/localcluster}"
mkdir -p "$(dirname "$out")"
# A cold build compiles ~2,500 packages for minutes: the wrapper shows how far it is.
CGO_ENABLED=0 GOWORK=off ../buildprogress/buildprogress.sh localcluster go build -ldflags "$(tr '\n' ' ' < ldflags | xargs)" -o "$out" .
echo "$out"
