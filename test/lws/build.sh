#!/usr/bin/env bash
# Builds LeaderWorkerSet's controller manager (sigs.k8s.io/lws/cmd at the version go.mod pins)
# and copies, from the same module, the manifests the harness applies: the CRDs
# (config/crd/bases) and the webhook configurations (config/webhook/manifests.yaml). Skipped
# while its inputs are unchanged (../buildstamp/buildstamp.sh).
# Usage: test/lws/build.sh [output]   (default test/lws/bin/lws)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/lws}"
manifests="$out-manifests"
. ../buildstamp/buildstamp.sh "$out" "$manifests/crd"
version="$(go list -m -f '{{.Version}}' sigs.k8s.io/lws)"
../buildprogress/buildprogress.sh lws go build -ldflags "-X sigs.k8s.io/lws/pkg/version.GitVersion=$version" -o "$out" sigs.k8s.io/lws/cmd
src="$(go list -m -f '{{.Dir}}' sigs.k8s.io/lws)"
rm -rf "$manifests"
mkdir -p "$manifests/crd"
# The module cache is read-only; install gives the copies a mode later builds can replace.
install -m 0644 "$src"/config/crd/bases/*.yaml "$manifests/crd/"
install -m 0644 "$src/config/webhook/manifests.yaml" "$manifests/webhook.yaml"
buildstamp_write
echo "$out"
