#!/usr/bin/env bash
# Builds the localcluster binary with the same flags the test harness
# (test/cluster.Build) uses, so both share the Go build cache.
# Usage: test/localcluster/build.sh [output]   (default test/localcluster/bin/localcluster)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/localcluster}"
mkdir -p "$(dirname "$out")"
CGO_ENABLED=0 GOWORK=off go build -ldflags "$(tr '\n' ' ' < ldflags | xargs)" -o "$out" .
echo "$out"
