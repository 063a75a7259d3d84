#!/usr/bin/env bash
# Builds Kueue's controller manager (sigs.k8s.io/kueue/cmd/kueue at the version go.mod pins) and
# copies, from the same module, the manifests the e2e harness applies: the CRDs
# (config/components/crd/bases) and the webhook configurations (config/components/webhook).
# Skipped while its inputs are unchanged (../buildstamp/buildstamp.sh).
# The visibility API server reads its certificate from a fixed /visibility when Kueue does not
# manage certificates; the build makes that path relative (visibility/ in the process's working
# directory), so a harness gives it ours without writing outside its scratch directory.
# Usage: test/kueue/build.sh [output]   (default test/kueue/bin/kueue)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/kueue}"
manifests="$out-manifests"
. ../buildstamp/buildstamp.sh "$out" "$manifests/crd"
version="$(go list -m -f '{{.Version}}' sigs.k8s.io/kueue)"
../buildprogress/buildprogress.sh kueue go build -ldflags "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$version -X sigs.k8s.io/kueue/pkg/visibility.certDir=visibility" -o "$out" sigs.k8s.io/kueue/cmd/kueue
src="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
rm -rf "$manifests"
mkdir -p "$manifests/crd"
# The module cache is read-only; install gives the copies a mode later builds can replace.
install -m 0644 "$src"/config/components/crd/bases/*.yaml "$manifests/crd/"
install -m 0644 "$src/config/components/webhook/manifests.yaml" "$manifests/webhook.yaml"
buildstamp_write
echo "$out"
