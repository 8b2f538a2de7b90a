#!/bin/bash
# build-qemu-fuzz.sh [--output FILE]: build QEMU's own fuzzer, qemu-fuzz-x86_64, from the
# same patched tree as build-qemu.sh (scripts/lib-qemu.sh), with clang,
# libFuzzer and AddressSanitizer (configure --enable-fuzzing --enable-asan,
# docs/devel/testing/fuzzing.rst).  Its generic-fuzz-virtio-kstaled target
# (qemu-device/patches/0010) drives the whole device through the PCI
# transport: configuration space, BARs, virtqueues, reports and resets.
# Its devices are those qemu-device/devices/fuzz.mak selects: q35 and the
# kstaled device.
# Cached under $KSTALED_CACHE/qemu-fuzz-<hash>/, keyed by the tarball, the
# patches, the device list and the scripts; the binary's path is printed
# on stdout (and the binary copied to --output FILE when given).  Beside it: the tree's
# scripts/oss-fuzz tools that turn a crash into a qtest reproducer.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib-qemu.sh
. "$KSTALED_TOP/scripts/lib-qemu.sh"

output=
while [ $# -gt 0 ]; do
	case "$1" in
	--output) output=${2:?--output needs a file}; shift ;;
	*) die "unknown argument '$1'" ;;
	esac
	shift
done

devices=$KSTALED_TOP/qemu-device/devices/fuzz.mak
hash=$(input_hash "$qemu_orig_sha256" "${patches[@]}" "$devices" "$0" \
	"$KSTALED_TOP/scripts/lib-qemu.sh")
out_dir=$KSTALED_CACHE/qemu-fuzz-$hash

build() {
	[ -x "$out_dir/qemu-fuzz-x86_64" ] && return
	local work=$KSTALED_CACHE/qemu-fuzz-work src start
	start=$(date +%s)
	export CCACHE_BASEDIR=$work
	# The fuzzer runs its machine under the qtest accelerator, never TCG,
	# so the build leaves out TCG's translator, the bulk of a QEMU build.
	# -O1 with line tables only, as OSS-Fuzz builds QEMU: ASan's reports
	# still name file and line, and clang takes 15 % less CPU time than
	# at -O2 -g.
	src=$(qemu_configured_tree "$work" "$devices" --cc="ccache clang" --cxx="ccache clang++" \
		--enable-fuzzing --enable-asan --disable-tcg \
		--extra-cflags="-O1 -gline-tables-only")
	log "building qemu-fuzz-x86_64"
	if ! ninja -C "$src/build" qemu-fuzz-x86_64 >"$work/build.log" 2>&1; then
		grep -B2 -A10 'error' "$work/build.log" | tail -n 40 >&2
		die "QEMU fuzzer build failed; full log: $work/build.log"
	fi
	mkdir -p "$out_dir.tmp"
	cp "$src/build/qemu-fuzz-x86_64" "$out_dir.tmp/"
	cp "$src/scripts/oss-fuzz/reorder_fuzzer_qtest_trace.py" \
		"$src/scripts/oss-fuzz/output_reproducer.py" "$out_dir.tmp/"
	rm -rf "$out_dir"
	mv "$out_dir.tmp" "$out_dir"
	log "built $out_dir/qemu-fuzz-x86_64 in $(($(date +%s) - start)) s"
}

layer_build qemu-fuzz "$out_dir/qemu-fuzz-x86_64" build
[ -n "$output" ] && copy_output "$out_dir/qemu-fuzz-x86_64" "$output"
echo "$out_dir/qemu-fuzz-x86_64"
