# Helpers for the in-guest kstaled tests; sourced, not run:
#   . /guest/lib-kstaled.sh
# Sizes are in bytes, as memory.idle_page_stats reports them.

MiB=$((1024 * 1024))

fail() {
	echo "FAIL: $*"
	exit 1
}

# kstaled_stat CGROUP KEY: one row of CGROUP/memory.idle_page_stats.
kstaled_stat() {
	awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' \
		"$1/memory.idle_page_stats" || fail "no row '$2' in $1/memory.idle_page_stats"
}

# kstaled_idle CGROUP [BUCKET]: idle bytes of every kind idle for at
# least BUCKET scans (1, 2, 5, 15, ...; default 1).
kstaled_idle() {
	local prefix=idle
	[ "${2:-1}" = 1 ] || prefix=idle_$2
	awk -v p="$prefix" '$1 == p "_clean" || $1 == p "_dirty_file" ||
		$1 == p "_dirty_swap" { sum += $2; n++ }
		END { if (n != 3) exit 1; print sum }' "$1/memory.idle_page_stats" ||
		fail "no $prefix rows in $1/memory.idle_page_stats"
}

# kstaled_wait_scans CGROUP N: wait until N more full scans are published.
kstaled_wait_scans() {
	local start
	start=$(kstaled_stat "$1" scans)
	while [ $(($(kstaled_stat "$1" scans) - start)) -lt "$2" ]; do
		sleep 0.2
	done
}

# memload_start LOG ARGS...: start memload ARGS in the background, its
# output in LOG, and wait for its ready line; sets memload_pid.  Every
# memload started is killed when the test exits.
memload_pids=
memload_start() {
	local log=$1 tries=0
	shift
	memload "$@" >"$log" 2>&1 &
	memload_pid=$!
	memload_pids="$memload_pids $memload_pid"
	trap 'kill $memload_pids 2>/dev/null || true' EXIT
	until grep -q '^memload: ready' "$log"; do
		kill -0 "$memload_pid" 2>/dev/null || fail "memload $* died: $(cat "$log")"
		tries=$((tries + 1))
		[ "$tries" -lt 600 ] || fail "memload $* not ready after 60 s"
		sleep 0.1
	done
	cat "$log"
}

# expect_near WHAT GOT WANT TOLERANCE: GOT within WANT +- TOLERANCE bytes.
expect_near() {
	echo "$1: got $2, want $3 +- $4"
	[ "$2" -ge $(($3 - $4)) ] && [ "$2" -le $(($3 + $4)) ] ||
		fail "$1: $2 bytes is not within $4 of $3"
}

# expect_below WHAT GOT LIMIT
expect_below() {
	echo "$1: got $2, want < $3"
	[ "$2" -lt "$3" ] || fail "$1: $2 bytes is not below $3"
}
