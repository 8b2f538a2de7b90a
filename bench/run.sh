#!/bin/bash
# run.sh [--output DIR] [SECTION...]: the kstaled-vm benchmarks.  Sets up
# the host and builds what they need through meson (as scripts/test.sh
# does), runs each section bench/section-N-NAME.sh (all of them, or those
# whose NAME is given), then prints one table per section and writes
# DIR/bench.json and DIR/bench.png (default DIR:
# $KSTALED_CACHE/bench/<UTC time>).
# Environment: KSTALED_BUILD_DIR (default ./build); KSTALED_BENCH_SCANS and
# KSTALED_BENCH_MEM_MIB (see section-1-scan-cost.sh).
#
# A section is a script bench/section-N-NAME.sh OUTDIR, run with
# KSTALED_KERNEL, KSTALED_KERNEL_WITHOUT_KSTALED, KSTALED_QEMU,
# KSTALED_INITRAMFS, KSTALED_AGENT and KSTALED_CTL set, that writes
# OUTDIR/section-N-NAME.json in the format bench/report.py describes;
# report.py keeps a "not measured" slot for each of its SLOTS without one.
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"

out=$KSTALED_CACHE/bench/$(date -u +%Y%m%dT%H%M%SZ)
if [ "${1:-}" = --output ]; then
	[ $# -ge 2 ] || die "--output needs a directory"
	out=$2
	shift 2
fi

sections=()
for script in "$KSTALED_TOP"/bench/section-*.sh; do
	name=${script##*/section-[0-9]-}
	name=${name%.sh}
	if [ $# -eq 0 ] || printf '%s\n' "$@" | grep -qx "$name"; then
		sections+=("$script")
	fi
done
[ ${#sections[@]} -gt 0 ] || die "no benchmark section named $*"

"$KSTALED_TOP/scripts/setup-host.sh" >&2
build_dir=${KSTALED_BUILD_DIR:-$KSTALED_TOP/build}
meson_build "$build_dir" >&2
# Section 7 alone boots the kernel without kstaled, which is no default
# target: a kernel build is half an hour here.
if printf '%s\n' "${sections[@]}" | grep -q '/section-7-hooks-off\.sh$'; then
	/usr/bin/meson compile -C "$build_dir" kernel-without-kstaled >&2
fi
export KSTALED_KERNEL=$build_dir/bzImage
export KSTALED_KERNEL_WITHOUT_KSTALED=$build_dir/bzImage-without-kstaled
export KSTALED_QEMU=$build_dir/qemu-system-x86_64
export KSTALED_INITRAMFS=$build_dir/tests/initramfs.cpio.gz
export KSTALED_AGENT=$build_dir/host-agent/kstaled-agent
export KSTALED_CTL=$build_dir/host-agent/kstaled-ctl

mkdir -p "$out"
for script in "${sections[@]}"; do
	bash "$script" "$out"
done
/usr/bin/python3 "$KSTALED_TOP/bench/report.py" "$out"
