# Helpers for the benchmark sections; sourced, not run.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

# guest_bench_json NAME [RUN-GUEST OPTION...]: boot the guest running
# tests/guest/NAME.sh and print the JSON of its one "BENCH {...}" line.
# The console goes to stderr, so that a run can be followed.
guest_bench_json() {
	local name=$1 console json
	shift
	console=$("$KSTALED_TOP/tests/run-guest.sh" "$@" "$name" | tee -a /dev/stderr) ||
		die "guest benchmark $name failed"
	json=$(sed -n 's/^BENCH //p' <<<"$console" | tr -d '\r')
	[ "$(wc -l <<<"$json")" -eq 1 ] && jq -e . >/dev/null <<<"$json" ||
		die "guest benchmark $name printed no single valid BENCH line"
	echo "$json"
}
