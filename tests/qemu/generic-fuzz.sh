#!/bin/bash
# generic-fuzz.sh [SECONDS]: run QEMU's own generic-fuzz target for the
# device, generic-fuzz-virtio-kstaled (qemu-device/patches/0010), for
# SECONDS (default 60) under AddressSanitizer.  It drives the whole device
# from the guest's side (PCI configuration, BARs, virtqueues, DMA into
# reports, resets), where fuzz-report.sh reaches the parser alone.  The
# fuzzer is built by scripts/build-qemu-fuzz.sh from the same patched
# tree as the emulator.  A crash, sanitizer report, leak or hang (the
# target's QEMU_FUZZ_TIMEOUT) fails the run; the input is kept under
# $KSTALED_CACHE/fuzz-artifacts/generic/, beside its qtest trace and the
# C reproducer that scripts/oss-fuzz/output_reproducer.py makes of it, to
# add to the series' qtest (tests/qtest/virtio-kstaled-test.c).
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

seconds=${1:-60}
case "$seconds" in
'' | *[!0-9]*) die "SECONDS must be a whole number, got '$seconds'" ;;
esac

# build-qemu-fuzz.sh is cached: this is the build meson's qemu-fuzz made.
fuzzer=$("$KSTALED_TOP/scripts/build-qemu-fuzz.sh")
target=generic-fuzz-virtio-kstaled
artifacts=$KSTALED_CACHE/fuzz-artifacts/generic
mkdir -p "$artifacts"
scratch=$(mktemp -d /var/tmp/kstaled-generic-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# reproduce CRASH: the qtest trace of CRASH and a C reproducer from it,
# next to CRASH, as docs/devel/testing/fuzzing.rst describes.
reproduce() {
	local crash=$1 tools=${fuzzer%/*}
	QEMU_FUZZ_TIMEOUT=0 QTEST_LOG=1 FUZZ_SERIALIZE_QTEST=1 \
		"$fuzzer" --fuzz-target="$target" "$crash" >"$crash.log" 2>&1 || true
	if ! /usr/bin/python3 "$tools/reorder_fuzzer_qtest_trace.py" "$crash.log" >"$crash.qtest" ||
		! /usr/bin/python3 "$tools/output_reproducer.py" -owner "kstaled-vm" \
			-name "test_fuzz_${crash##*/crash-}" "$crash.qtest" >"$crash.c"; then
		log "could not make a reproducer of $crash; its trace is $crash.log"
	fi
}

if ! "$fuzzer" --fuzz-target="$target" -max_total_time="$seconds" \
	-print_final_stats=1 -artifact_prefix="$artifacts/" \
	"$scratch" >"$scratch/log" 2>&1; then
	tail -n 60 "$scratch/log" >&2
	crash=$(sed -n 's/^artifact_prefix=.*; Test unit written to \(.*\)$/\1/p' "$scratch/log" | tail -n 1)
	[ -f "$crash" ] || die "the fuzzer failed without writing an input; log above"
	reproduce "$crash"
	die "$target found a bad input: $crash (trace $crash.qtest, reproducer $crash.c)"
fi
# The target lists the memory regions it fuzzes: the device's must be
# among them, or the configuration no longer matches the device.
grep -E '^  \* virtio-pci-(common|device|notify)-virtio-kstaled' "$scratch/log" ||
	die "$target fuzzed none of the device's regions: $(grep '^  \* ' "$scratch/log" | paste -sd ' ')"
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$scratch/log"
grep -E '#[0-9]+[[:space:]]+DONE' "$scratch/log" | tail -n 1
