#!/bin/bash
# build-qemu.sh [--output FILE]
# Build qemu-system-x86_64 from Debian's qemu 10.0.2 orig tarball (from
# bookworm-backports) with the project's patch series
# (qemu-device/patches/series), as scripts/lib-qemu.sh prepares it, with
# only the devices qemu-device/devices/emulator.mak selects.
# Cached under $KSTALED_CACHE/qemu-<hash>/, keyed by the tarball, the
# patches, the device list, the fuzz harness and the scripts (which hold
# the configure flags); the binary's path is printed on stdout.  Beside it: the series' qtest of the kstaled device
# (virtio-kstaled-test) and a libFuzzer binary of its report parser
# (fuzz-kstaled-report), built from the same patched tree.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

output=
while [ $# -gt 0 ]; do
	case "$1" in
	--output) output=${2:?--output needs a file}; shift ;;
	*) die "unknown argument '$1'" ;;
	esac
	shift
done

# shellcheck source-path=SCRIPTDIR source=lib-qemu.sh
. "$KSTALED_TOP/scripts/lib-qemu.sh"
fuzz_harness=$KSTALED_TOP/tests/qemu/fuzz-report.c
devices=$KSTALED_TOP/qemu-device/devices/emulator.mak
hash=$(input_hash "$qemu_orig_sha256" "${patches[@]}" "$fuzz_harness" "$devices" \
	"$0" "$KSTALED_TOP/scripts/lib-qemu.sh")
out_dir=$KSTALED_CACHE/qemu-$hash

build() {
	[ -x "$out_dir/qemu-system-x86_64" ] && return
	local work=$KSTALED_CACHE/qemu-work src start
	start=$(date +%s)
	export CCACHE_BASEDIR=$work
	src=$(qemu_configured_tree "$work" "$devices" --cc="ccache gcc")
	log "building qemu-system-x86_64 and tests/qtest/virtio-kstaled-test"
	if ! ninja -C "$src/build" qemu-system-x86_64 \
		tests/qtest/virtio-kstaled-test >"$work/build.log" 2>&1; then
		grep -B2 -A10 'error' "$work/build.log" | tail -n 40 >&2
		die "QEMU build failed; full log: $work/build.log"
	fi
	mkdir -p "$out_dir.tmp"
	cp "$src/build/qemu-system-x86_64" \
		"$src/build/tests/qtest/virtio-kstaled-test" "$out_dir.tmp/"
	# The parser's own source file, with the include paths QEMU's build
	# uses, so that the fuzzer runs exactly the code the device runs.
	log "building fuzz-kstaled-report"
	# shellcheck disable=SC2046 # pkg-config prints several flags
	if ! clang -g -O1 -fsanitize=fuzzer,address -std=gnu11 \
		-iquote "$src/build" -iquote "$src/include" -iquote "$src" \
		-iquote "$src/host/include/x86_64" -iquote "$src/host/include/generic" \
		-isystem "$src/linux-headers" -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
		$(pkg-config --cflags glib-2.0) \
		"$fuzz_harness" "$src/hw/virtio/virtio-kstaled-report.c" \
		$(pkg-config --libs glib-2.0) -o "$out_dir.tmp/fuzz-kstaled-report" \
		>"$work/fuzz-build.log" 2>&1; then
		tail -n 30 "$work/fuzz-build.log" >&2
		die "fuzzer build failed; full log: $work/fuzz-build.log"
	fi
	rm -rf "$out_dir"
	mv "$out_dir.tmp" "$out_dir"
	log "built $out_dir/qemu-system-x86_64 in $(($(date +%s) - start)) s"
}

layer_build qemu "$out_dir/qemu-system-x86_64" build
[ -n "$output" ] && copy_output "$out_dir/qemu-system-x86_64" "$output"
echo "$out_dir/qemu-system-x86_64"
