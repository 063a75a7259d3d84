#!/usr/bin/env bash
# Runs a `go build` and shows how far it is: packages started of those it must compile (the
# stale ones, from `go list -deps`), the time elapsed and an estimate of what is left. On a
# terminal one line refreshes in place; otherwise (CI logs, go test) a line every
# BUILDPROGRESS_EVERY seconds (default 10), so a cold build that takes minutes never goes silent.
#
# Usage: test/buildprogress/buildprogress.sh LABEL go build [build flags] [packages]
# Progress goes to stderr; go build's own output (compiler errors) to stdout. The exit status
# is go build's. The environment (GOWORK, CGO_ENABLED, GOOS...) applies to both go commands,
# so the count is of the build that runs; the build itself and its cache are untouched.
set -uo pipefail

label="${1:?usage: buildprogress.sh LABEL go build [flags] [packages]}"
shift
if [ "$#" -lt 2 ] || [ "$2" != build ]; then
	echo "buildprogress.sh: expected 'go build ...' after the label, got: $*" >&2
	exit 2
fi
gocmd="$1"
shift 2
every="${BUILDPROGRESS_EVERY:-10}"

# go list takes the build flags but not -o (nor -v, -x, -json: output of the build itself).
list_args=()
skip=0
for a in "$@"; do
	if [ "$skip" = 1 ]; then
		skip=0
		continue
	fi
	case "$a" in
	-o) skip=1 ;;
	-o=* | -v | -x | -json) ;;
	*) list_args+=("$a") ;;
	esac
done

# Only what is not in the build cache will be compiled, and only that is printed by -v.
total=$("$gocmd" list -deps -f '{{if .Stale}}{{.ImportPath}}{{end}}' "${list_args[@]}" | grep -c .)
if [ "${total:-0}" -le 1 ]; then
	# Nothing but the main package (always stale for go list): seconds, no progress to show.
	exec "$gocmd" build "$@"
fi

tty=0
[ -t 2 ] && tty=1

fmt_dur() {
	local s=$1
	if [ "$s" -ge 60 ]; then
		printf '%dm%02ds' $((s / 60)) $((s % 60))
	else
		printf '%ds' "$s"
	fi
}

start=$SECONDS
done_n=0
last_print=-1
status_line() {
	local elapsed=$((SECONDS - start)) line
	line="$label: compiling $done_n/$total packages ($((100 * done_n / total))%), $(fmt_dur "$elapsed") elapsed"
	if [ "$done_n" -ge "$total" ]; then
		line+=", linking"
	elif [ "$done_n" -ge 20 ] && [ "$elapsed" -ge 5 ]; then
		# Packages differ in size, so this is rough; it settles as the count grows.
		line+=", about $(fmt_dur $((elapsed * (total - done_n) / done_n))) left"
	fi
	printf '%s' "$line"
}
show() {
	if [ "$tty" = 1 ]; then
		printf '\r\033[K%s' "$(status_line)" >&2
	elif [ $((SECONDS - last_print)) -ge "$every" ] || [ "${1:-}" = now ]; then
		printf '%s\n' "$(status_line)" >&2
		last_print=$SECONDS
	fi
}

printf '%s: compiling %d packages\n' "$label" "$total" >&2
last_print=$SECONDS
"$gocmd" build -v "$@" 2>&1 | {
	while :; do
		line=""
		IFS= read -r -t 1 line
		got=$?
		if [ "$got" -gt 128 ]; then
			show # a long package: the clock still moves
			continue
		fi
		if [ "$got" = 0 ] || [ -n "$line" ]; then # the last line may lack its newline
			# -v prints each package as its compile starts, a bare import path; anything
			# else (a "# pkg" header, file:line: errors, go: downloading) is go's own output.
			if [[ "$line" =~ ^[A-Za-z0-9_./~+-]+$ ]]; then
				[ "$done_n" -lt "$total" ] && done_n=$((done_n + 1))
			else
				[ "$tty" = 1 ] && printf '\r\033[K' >&2
				printf '%s\n' "$line"
			fi
			show
		fi
		[ "$got" = 0 ] || break # end of the build's output
	done
	[ "$tty" = 1 ] && printf '\r\033[K' >&2
}
rc=${PIPESTATUS[0]}
if [ "$rc" = 0 ]; then
	printf '%s: built in %s\n' "$label" "$(fmt_dur $((SECONDS - start)))" >&2
fi
exit "$rc"
