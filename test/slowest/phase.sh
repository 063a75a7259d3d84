#!/usr/bin/env bash
# Times one phase of a run (a build, the suite, the fuzz) and appends "SECONDS LABEL STATUS" to
# $PHASES_FILE, so the run can end with where its time went; exits with the command's status.
# Usage: test/slowest/phase.sh LABEL command [args...]
#        test/slowest/phase.sh --report   (the phases recorded in $PHASES_FILE, in order, and their sum)
set -uo pipefail
file="${PHASES_FILE:-}"
if [ "${1:-}" = --report ]; then
	[ -n "$file" ] && [ -s "$file" ] || exit 0
	echo
	echo "phases (in order):"
	awk '{ printf "  %7ds  %-4s %s\n", $1, $3, $2; sum += $1 } END { printf "  %7ds  in all (%dm%02ds)\n", sum, sum / 60, sum % 60 }' "$file"
	exit 0
fi
label="${1:?usage: phase.sh LABEL command [args...]}"
shift
start=$SECONDS
"$@"
rc=$?
if [ -n "$file" ]; then
	echo "$((SECONDS - start)) $label $([ "$rc" = 0 ] && echo ok || echo FAIL)" >> "$file"
fi
exit "$rc"
