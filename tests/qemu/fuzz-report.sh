#!/bin/bash
# fuzz-report.sh [SECONDS]: fuzz the virtio-kstaled report parser for
# SECONDS (default 20) with libFuzzer and AddressSanitizer, from the seed
# corpus in tests/qemu/corpus/.  The fuzzer is built by
# scripts/build-qemu.sh from the patched QEMU tree's own
# hw/virtio/virtio-kstaled-report.c.  Fails on any crash, sanitizer
# report, leak, or accepted report that breaks the protocol; the input
# that did it is kept under $KSTALED_CACHE/fuzz-artifacts/.  Prints the
# run's figures (executions, coverage).
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

seconds=${1:-20}
case "$seconds" in
'' | *[!0-9]*) die "SECONDS must be a whole number, got '$seconds'" ;;
esac

# build-qemu.sh is cached: this is the build that gave meson's emulator.
qemu=$("$KSTALED_TOP/scripts/build-qemu.sh")
fuzzer=${qemu%/*}/fuzz-kstaled-report
[ -x "$fuzzer" ] || die "$fuzzer does not exist: scripts/build-qemu.sh builds it"
artifacts=$KSTALED_CACHE/fuzz-artifacts
mkdir -p "$artifacts"
# Inputs the fuzzer finds go to a scratch directory; the seed corpus in
# the checkout is only read.
scratch=$(mktemp -d /var/tmp/kstaled-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

if ! "$fuzzer" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
	-print_final_stats=1 -artifact_prefix="$artifacts/" \
	"$scratch" "$KSTALED_TOP/tests/qemu/corpus" >"$scratch/log" 2>&1; then
	tail -n 60 "$scratch/log" >&2
	die "the fuzzer found a bad input; see $artifacts/"
fi
grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)' "$scratch/log"
grep -E '#[0-9]+[[:space:]]+DONE' "$scratch/log" | tail -n 1
