# The patched QEMU tree the build scripts share (build-qemu.sh for the
# emulator, build-qemu-fuzz.sh for QEMU's own fuzzer): Debian's qemu
# 10.0.2 orig tarball from bookworm-backports and the project's series
# (qemu-device/patches/series).  Sourced after lib.sh.
# shellcheck shell=bash

qemu_orig=qemu_10.0.2+ds.orig.tar.xz
qemu_orig_sha256=0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1
qemu_orig_url=http://deb.debian.org/debian/pool/main/q/qemu/qemu_10.0.2%2bds.orig.tar.xz
qemu_tarball=$KSTALED_CACHE/downloads/$qemu_orig

patches=()
add_series "$KSTALED_TOP/qemu-device/patches"

# The configure flags both builds share: x86_64 system emulation only, no
# UI, no docs, no firmware of its own (Debian's qemu-system-data, seabios
# and ipxe-qemu packages provide it), no debug information (-g costs gcc
# a quarter more CPU time on QEMU's sources).  /usr/bin/python3 is Debian's, with
# backports' meson; another python3 first on PATH (pyenv) would not have it.
qemu_configure_flags=(--python=/usr/bin/python3 --target-list=x86_64-softmmu
	--disable-docs --disable-user --disable-gtk --disable-sdl
	--disable-vnc --disable-opengl --disable-spice --disable-curses
	--disable-rust --enable-fdt=system --disable-install-blobs --disable-debug-info
	--firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu)

qemu_download() {
	[ -f "$qemu_tarball" ] && return
	mkdir -p "${qemu_tarball%/*}"
	log "downloading $qemu_orig_url"
	curl -fsSL --retry 3 -o "$qemu_tarball.part" "$qemu_orig_url" ||
		die "download of $qemu_orig_url failed"
	echo "$qemu_orig_sha256  $qemu_tarball.part" | sha256sum -c --quiet - ||
		die "$qemu_orig_url: sha256 mismatch (expected $qemu_orig_sha256)"
	mv "$qemu_tarball.part" "$qemu_tarball"
}

# qemu_configured_tree WORK DEVICES CONFIGURE_FLAG...: a fresh patched
# tree in WORK/qemu-10.0.2, configured in its build/ with the shared flags
# and these, and with only the devices that the Kconfig file DEVICES
# (qemu-device/devices/*.mak) selects: --without-default-devices starts
# from none, and configure reads the device list from the tree's
# configs/devices/, where DEVICES is copied.  Prints the source directory.
qemu_configured_tree() {
	local work=$1 devices=$2 src
	shift 2
	src=$work/qemu-10.0.2
	qemu_download
	rm -rf "$work"
	mkdir -p "$work"
	log "unpacking $qemu_orig"
	tar --no-same-owner -xf "$qemu_tarball" -C "$work" || die "cannot unpack $qemu_tarball"
	log "applying ${#patches[@]} patches"
	apply_series "$src" "${patches[@]}"
	cp "$devices" "$src/configs/devices/x86_64-softmmu/kstaled-vm.mak" ||
		die "cannot copy $devices into $src"
	mkdir -p "$src/build"
	if ! (cd "$src/build" && ../configure "${qemu_configure_flags[@]}" \
		--without-default-devices --with-devices-x86_64=kstaled-vm "$@" \
		>"$work/configure.log" 2>&1); then
		tail -n 30 "$work/configure.log" >&2
		die "QEMU configure failed; full log: $work/configure.log"
	fi
	echo "$src"
}
