#!/bin/bash
# build-qemu.sh [--output FILE]
# Build qemu-system-x86_64 from Debian's qemu 10.0.2 orig tarball (from
# bookworm-backports) with the project's patch series
# (qemu-device/patches/series).  Cached under $KSTALED_CACHE/qemu-<hash>/,
# keyed by the tarball, the patches, the fuzz harness and this script
# (which holds the configure flags); the binary's path is printed on
# stdout.  Beside it: the series' qtest of the kstaled device
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

orig=qemu_10.0.2+ds.orig.tar.xz
orig_sha256=0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1
orig_url=http://deb.debian.org/debian/pool/main/q/qemu/qemu_10.0.2%2bds.orig.tar.xz
tarball=$KSTALED_CACHE/downloads/$orig

patches=()
add_series "$KSTALED_TOP/qemu-device/patches"
fuzz_harness=$KSTALED_TOP/tests/qemu/fuzz-report.c
hash=$(input_hash "$orig_sha256" "${patches[@]}" "$fuzz_harness" "$0")
out_dir=$KSTALED_CACHE/qemu-$hash

download() {
	[ -f "$tarball" ] && return
	mkdir -p "${tarball%/*}"
	log "downloading $orig_url"
	curl -fsSL --retry 3 -o "$tarball.part" "$orig_url" ||
		die "download of $orig_url failed"
	echo "$orig_sha256  $tarball.part" | sha256sum -c --quiet - ||
		die "$orig_url: sha256 mismatch (expected $orig_sha256)"
	mv "$tarball.part" "$tarball"
}

build() {
	[ -x "$out_dir/qemu-system-x86_64" ] && return
	local work=$KSTALED_CACHE/qemu-work src start
	src=$work/qemu-10.0.2
	start=$(date +%s)
	download
	rm -rf "$work"
	mkdir -p "$work"
	log "unpacking $orig"
	tar --no-same-owner -xf "$tarball" -C "$work" || die "cannot unpack $tarball"
	log "applying ${#patches[@]} patches"
	apply_series "$src" "${patches[@]}"

	# /usr/bin/python3 is Debian's, with backports' meson; another python3
	# first on PATH (pyenv) would not have it.  The firmware path points at
	# Debian's qemu-system-data, seabios and ipxe-qemu packages, since this
	# build installs no blobs of its own.
	export CCACHE_BASEDIR=$work
	mkdir -p "$src/build"
	if ! (cd "$src/build" && ../configure --python=/usr/bin/python3 \
		--target-list=x86_64-softmmu --cc="ccache gcc" \
		--disable-docs --disable-user --disable-gtk --disable-sdl \
		--disable-vnc --disable-opengl --disable-spice --disable-curses \
		--disable-rust --enable-fdt=system --disable-install-blobs \
		--firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu \
		>"$work/configure.log" 2>&1); then
		tail -n 30 "$work/configure.log" >&2
		die "QEMU configure failed; full log: $work/configure.log"
	fi
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

[ -x "$out_dir/qemu-system-x86_64" ] || with_lock qemu build
[ -n "$output" ] && copy_output "$out_dir/qemu-system-x86_64" "$output"
echo "$out_dir/qemu-system-x86_64"
