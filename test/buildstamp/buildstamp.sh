# The preamble of the build scripts of the third-party binaries (test/helm, test/kserve,
# test/kubectl, test/kueue, test/lws), sourced from their own folder before they build:
#
#   . ../buildstamp/buildstamp.sh "$out" [path...]
#   go build ... -o "$out" ...
#   buildstamp_write
#
# It builds as test/localcluster/build.sh builds (its own module, no cgo, no -trimpath), so a
# package two modules require at the same version is compiled once into the shared Go cache;
# takes a lock on $out, so two callers (make, a test run by hand) never build it at once; and
# ends the calling script with "$out (up to date)" while a stamp of its inputs (go.mod, go.sum,
# the module's own .go files but its tests, as test/kubectl's main, the calling script, this
# file, the Go version) matches the one buildstamp_write left next to $out and every other path
# given exists: a cold build takes minutes on 2 cores.
buildstamp_out="$1"
shift
mkdir -p "$(dirname "$buildstamp_out")"
export GOWORK=off CGO_ENABLED=0
exec 9>"$buildstamp_out.lock"
flock 9
buildstamp="$( (cat go.mod go.sum $(find . -maxdepth 1 -name '*.go' ! -name '*_test.go' | sort) "$(basename "$0")" "${BASH_SOURCE[0]}"; go version) | sha256sum | cut -d' ' -f1)"
buildstamp_fresh() {
  [ -x "$buildstamp_out" ] && [ "$(cat "$buildstamp_out.stamp" 2>/dev/null)" = "$buildstamp" ] || return 1
  local p
  for p in "$@"; do [ -e "$p" ] || return 1; done
}
if buildstamp_fresh "$@"; then
  echo "$buildstamp_out (up to date)"
  exit 0
fi
# buildstamp_write records the inputs of the build that just succeeded.
buildstamp_write() { echo "$buildstamp" > "$buildstamp_out.stamp"; }
