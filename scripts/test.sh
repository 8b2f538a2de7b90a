#!/bin/bash
# The whole test suite, from a fresh Debian 12 machine, as root: installs
# what it needs, builds (or reuses from the cache) the patched guest
# kernel, QEMU, the host agent and the guest image, then runs every test
# through meson.  Extra arguments go to "meson test" (e.g. a test name).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

start=$SECONDS
"$KSTALED_TOP/scripts/setup-host.sh"
setup_seconds=$((SECONDS - start))

build_dir=${KSTALED_BUILD_DIR:-$KSTALED_TOP/build}
mkdir -p "$build_dir/meson-logs"
# Every cached layer's build script (and debian-config-build) says here
# whether it was cold or warm: the summary below shows where the time went.
export KSTALED_LAYER_LOG=$build_dir/meson-logs/layers.log
: >"$KSTALED_LAYER_LOG"
start=$SECONDS
meson_build "$build_dir"
build_seconds=$((SECONDS - start))

# One libvirtd for the whole suite, so that no test stops it under
# another: the guest tests that only share it run two at a time.  (The
# agent tests that restart it run alone.)
# shellcheck source=tests/lib-libvirt.sh
. "$KSTALED_TOP/tests/lib-libvirt.sh"
stop_suite_libvirtd() {
	# An agent test may have restarted it: stop the one running now.
	[ -z "$libvirt_started_pid" ] ||
		libvirt_started_pid=$(cat "$KSTALED_CACHE/libvirtd.pid" 2>/dev/null || echo "$libvirt_started_pid")
	libvirt_stop
}
trap stop_suite_libvirtd EXIT
libvirt_start

# The kernel-config tests compile Debian's kernel config for minutes when
# cold and need no guest: for the whole suite they start now, at idle
# priority, filling the CPU the guest tests leave idle; their meson tests
# come last and find their stamps, or wait on their locks, and fail as
# they would have.
# (A process group of its own, so that an interrupted suite stops it.)
kernel_config_pid=
if [ $# -eq 0 ]; then
	# shellcheck disable=SC2016 # $1 is the inner shell's
	setsid nice -n 19 bash -c '"$1/scripts/debian-config-build.sh" &&
		"$1/scripts/page-flags-budget.sh"' kernel-config "$KSTALED_TOP" \
		>"$build_dir/meson-logs/kernel-config-background.log" 2>&1 &
	kernel_config_pid=$!
fi
stop_suite() {
	[ -z "$kernel_config_pid" ] || kill -- "-$kernel_config_pid" 2>/dev/null || true
	stop_suite_libvirtd
}
trap stop_suite EXIT

start=$SECONDS
set +e
/usr/bin/meson test -C "$build_dir" --print-errorlogs --num-processes 2 "$@"
rc=$?
set -e
test_seconds=$((SECONDS - start))
# Its meson tests waited for it: at most its last steps are left.
[ -z "$kernel_config_pid" ] || wait "$kernel_config_pid" || true
kernel_config_pid=
stop_suite

echo
echo "Where the time went: setup-host ${setup_seconds} s, build ${build_seconds} s," \
	"tests ${test_seconds} s (wall time, two at a time)."
echo "Cached layers (the first time each was asked for in this run):"
awk -F': ' '!seen[$1]++ { printf "  %-22s %s\n", $1, $2 }' "$KSTALED_LAYER_LOG"
echo "The ten longest tests:"
jq -rs 'sort_by(-.duration) | .[:10][] | "  \(.duration | floor | tostring | (" " * (5 - length)) + .) s  \(.name)"' \
	"$build_dir/meson-logs/testlog.json"
# One closing line any CI reader understands.
jq -rs '[.[] | .result] | "\(map(select(. == "OK" or . == "EXPECTEDFAIL")) | length) passed, \(map(select(. == "FAIL" or . == "TIMEOUT" or . == "ERROR" or . == "UNEXPECTEDPASS")) | length) failed, \(map(select(. == "SKIP")) | length) skipped"' \
	"$build_dir/meson-logs/testlog.json"
exit "$rc"
