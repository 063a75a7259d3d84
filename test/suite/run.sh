#!/usr/bin/env bash
# make test's suite: the main module's packages (go test -p, the e2e package excepted) and the
# e2e package as E2E_SHARDS processes (E2E_SHARD=i/n, each with its own cluster and operator:
# test/e2e/shard_test.go) side by side, and four other modules' tests in the background. The
# main packages stream as they run; the shards' and modules' logs follow when all have ended,
# then each package's time and the slowest tests of all of them (test/slowest/slowest.sh).
# Exits 1 when anything failed.
# Usage: test/suite/run.sh   (environment: GO, E2E_SHARDS, E2E_PARALLEL, PLUGIN_DIR, and
# what the tests read: LOCALCLUSTER_BIN, EPP_BIN...)
set -uo pipefail
cd "$(dirname "$0")/../.."
go="${GO:-go}"
shards="${E2E_SHARDS:-3}"
parallel="${E2E_PARALLEL:-4}"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

declare -A jobs
# Module tests: they mostly wait on timers and sockets.
(cd test/localcluster && GOWORK=off "$go" test -count=1 ./...) > "$logs/module-localcluster" 2>&1 &
jobs[module-localcluster]=$!
(cd test/epp && GOWORK=off "$go" test -count=1 ./...) > "$logs/module-epp" 2>&1 &
jobs[module-epp]=$!
(cd test/s3 && GOWORK=off "$go" test -count=1 ./...) > "$logs/module-s3" 2>&1 &
jobs[module-s3]=$!
(cd "${PLUGIN_DIR:?}" && GOWORK=off "$go" test -count=1 ./...) > "$logs/module-plugin" 2>&1 &
jobs[module-plugin]=$!
# The e2e shards: -parallel bounds each one's tests that may overlap (test/e2e/main_test.go).
e2e=github.com/example/inferenceservice-operator/test/e2e
for ((i = 0; i < shards; i++)); do
	E2E_SHARD="$i/$shards" "$go" test -timeout 45m -count=1 -parallel "$parallel" -v ./test/e2e/ > "$logs/e2e-$i" 2>&1 &
	jobs[e2e-$i]=$!
done
# The rest of the main module, streamed: -v for the per-test times.
"$go" list ./... | grep -vx "$e2e" > "$logs/packages"
"$go" test -timeout 45m -count=1 -parallel "$parallel" -v $(cat "$logs/packages") 2>&1 | tee "$logs/main"
status=${PIPESTATUS[0]}
[ "$status" = 0 ] || echo "FAIL: the main module's packages"
for job in $(printf '%s\n' "${!jobs[@]}" | sort); do
	if ! wait "${jobs[$job]}"; then
		echo "FAIL: $job"
		status=1
	fi
	echo "--- $job:"
	cat "$logs/$job"
done
# One summary of every go test -v log; a shard's package line names its shard.
for ((i = 0; i < shards; i++)); do
	sed -E "s#^(ok|FAIL)([[:space:]]+)$e2e([[:space:]])#\1\2$e2e[$i/$shards]\3#" "$logs/e2e-$i"
done | cat "$logs/main" - | SLOWEST_QUIET=1 test/slowest/slowest.sh 20
[ "$status" = 0 ]
