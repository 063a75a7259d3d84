#!/usr/bin/env bash
# Passes `go test -v` output through unchanged and, when it ends, lists every package with its
# time, slowest first, then the N slowest top-level tests (default 15) with their package: where
# a CI run's time goes.
# Usage: go test -v ./... | test/slowest/slowest.sh [N]   (SLOWEST_QUIET=1: the summary alone; with `set -o pipefail`, so the
# pipeline keeps go test's exit status: this filter itself always exits 0)
set -euo pipefail
n="${1:-15}"
# A top-level result line: "--- PASS: TestX (12.34s)"; subtests are indented. go test prints a
# package's results before its "ok" or "FAIL" line, so the tests seen since the previous such
# line are that package's. A package's line: "ok  <pkg>  12.345s" or "FAIL  <pkg>  12.345s".
awk -v n="$n" -v quiet="${SLOWEST_QUIET:-}" '
quiet == "" { print; fflush() }
/^--- (PASS|FAIL|SKIP): [^ ]+ \([0-9.]+s\)$/ {
	secs = $NF; gsub(/[()s]/, "", secs)
	pending[++np] = sprintf("%9.2fs  %-5s %s", secs, $2 == "PASS:" ? "pass" : $2 == "FAIL:" ? "FAIL" : "skip", $3)
	next
}
($1 == "ok" || $1 == "FAIL") && NF >= 3 {
	for (i = 1; i <= np; i++) done[++nd] = pending[i] "  (" $2 ")"
	np = 0
	if ($3 ~ /^[0-9.]+s$/) {
		secs = $3; gsub(/s/, "", secs)
		pkgs[++npk] = sprintf("%9.2fs  %-4s %s", secs, $1 == "ok" ? "ok" : "FAIL", $2)
	}
}
END {
	for (i = 1; i <= np; i++) done[++nd] = pending[i]
	if (npk > 0) {
		printf "\npackages by time (of %d; they run -p at a time):\n", npk
		cmd = "sort -rn"
		for (i = 1; i <= npk; i++) print pkgs[i] | cmd
		close(cmd)
	}
	if (nd == 0) exit
	printf "\nslowest tests (of %d):\n", nd
	cmd = "sort -rn | head -n " n
	for (i = 1; i <= nd; i++) print done[i] | cmd
	close(cmd)
}'
