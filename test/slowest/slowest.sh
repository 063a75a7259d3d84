#!/usr/bin/env bash
# Passes `go test -v` output through unchanged and, when it ends, lists the N slowest top-level
# tests (default 15) with their package, slowest first: where a CI run's time goes.
# Usage: go test -v ./... | test/slowest/slowest.sh [N]   (with `set -o pipefail`, so the
# pipeline keeps go test's exit status: this filter itself always exits 0)
set -euo pipefail
n="${1:-15}"
# A top-level result line: "--- PASS: TestX (12.34s)"; subtests are indented. go test prints a
# package's results before its "ok" or "FAIL" line, so the tests seen since the previous such
# line are that package's.
awk -v n="$n" '
{ print; fflush() }
/^--- (PASS|FAIL|SKIP): [^ ]+ \([0-9.]+s\)$/ {
	secs = $NF; gsub(/[()s]/, "", secs)
	pending[++np] = sprintf("%9.2fs  %-5s %s", secs, $2 == "PASS:" ? "pass" : $2 == "FAIL:" ? "FAIL" : "skip", $3)
	next
}
($1 == "ok" || $1 == "FAIL") && NF >= 3 {
	for (i = 1; i <= np; i++) done[++nd] = pending[i] "  (" $2 ")"
	np = 0
}
END {
	for (i = 1; i <= np; i++) done[++nd] = pending[i]
	if (nd == 0) exit
	printf "\nslowest tests (of %d):\n", nd
	cmd = "sort -rn | head -n " n
	for (i = 1; i <= nd; i++) print done[i] | cmd
	close(cmd)
}'
