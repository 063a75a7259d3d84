#!/usr/bin/env bash
# Builds the kubectl CLI: this module's main (upstream's cmd/kubectl main) over the k8s.io/kubectl
# library at the version go.mod pins, stamped as Kubernetes' release build stamps it
# (hack/lib/version.sh: component-base's and client-go's version variables), with the release
# that library version belongs to (v0.37.2 is Kubernetes v1.37.2), so `kubectl version` reports
# what it is. Skipped while its inputs are unchanged (../buildstamp/buildstamp.sh).
# Usage: test/kubectl/build.sh [output]   (default test/kubectl/bin/kubectl)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/kubectl}"
. ../buildstamp/buildstamp.sh "$out"
lib="$(go list -m -f '{{.Version}}' k8s.io/kubectl)"
version="v1.${lib#v0.}"
minor="${version#v1.}"
minor="${minor%%.*}"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
../buildprogress/buildprogress.sh kubectl go build -ldflags "-s -w$ldflags" -o "$out.tmp" .
# The stamp is the build's whole point: a binary that reports another version is not kept.
got="$("$out.tmp" version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)".*/\1/p' | head -1)"
if [ "$got" != "$version" ]; then
  rm -f "$out.tmp"
  echo "test/kubectl/build.sh: the built kubectl reports $got, want $version" >&2
  exit 1
fi
mv "$out.tmp" "$out"
buildstamp_write
echo "$out"
