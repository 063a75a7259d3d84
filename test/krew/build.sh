#!/usr/bin/env bash
# Builds krew (kubectl-krew) and krew-index's validate-krew-manifest from the sigs.k8s.io/krew
# module this folder's go.mod pins, so the release's krew manifest is checked by krew itself.
# validate-krew-manifest is written next to krew. Skipped while its inputs are unchanged
# (../buildstamp/buildstamp.sh).
# Usage: test/krew/build.sh [output]   (default test/krew/bin/krew)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/krew}"
validate="$(dirname "$out")/validate-krew-manifest"
. ../buildstamp/buildstamp.sh "$out" "$validate"
go build -o "$validate.tmp" sigs.k8s.io/krew/cmd/validate-krew-manifest
go build -o "$out.tmp" sigs.k8s.io/krew/cmd/krew
mv "$validate.tmp" "$validate"
mv "$out.tmp" "$out"
buildstamp_write
echo "$out"
