#!/usr/bin/env bash
# Builds the local cluster's S3 server: this module's main, gofakes3 at the version go.mod pins
# behind a SigV4 check. Built as ../buildstamp builds the third-party binaries (own module, no
# cgo, a flock on $out), and skipped while a stamp of its inputs matches; unlike theirs, the
# inputs include this module's own .go files, which are the server.
# Usage: test/s3/build.sh [output]   (default test/s3/bin/s3)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/s3}"
mkdir -p "$(dirname "$out")"
export GOWORK=off CGO_ENABLED=0
exec 9>"$out.lock"
flock 9
stamp="$( (cat go.mod go.sum build.sh $(ls *.go | grep -v _test.go); go version) | sha256sum | cut -d' ' -f1)"
if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$out (up to date)"
  exit 0
fi
go build -o "$out" .
echo "$stamp" > "$out.stamp"
echo "$out"
