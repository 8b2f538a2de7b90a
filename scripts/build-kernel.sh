#!/bin/bash
# build-kernel.sh [--without-kstaled] [--output FILE] [--module-output FILE]
#                 [--deb-output DIR]
# Build the guest kernel: Debian's linux-source-6.12, the project's patch
# series (guest-kernel/patches/series, then series.driver if present), the
# config fragments guest-kernel/vm-guest.config (a virtual machine's
# kernel: the defconfig's desktop and laptop hardware off) and
# kstaled.config merged onto the kernel's own "x86_64_defconfig
# kvm_guest.config", then for the variant without kstaled
# without-kstaled.config.  The kstaled variant builds the virtio_kstaled
# driver as a module, as a distribution ships it, with
# "make bindeb-pkg", so it also yields the Debian packages a user installs
# in a guest (linux-image-6.12.N-kstaled and its headers).
# The outputs are cached under $KSTALED_CACHE/kernel-<variant>-<hash>/,
# keyed by the source version, the patches and the config; the bzImage's
# path is printed on stdout (and the image copied to --output FILE when
# given; the kstaled variant's virtio_kstaled.ko to --module-output FILE
# and its .deb files into --deb-output DIR).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

variant=kstaled
output= module_output= deb_output=
while [ $# -gt 0 ]; do
	case "$1" in
	--without-kstaled) variant=no-kstaled ;;
	--output) output=${2:?--output needs a file}; shift ;;
	--module-output) module_output=${2:?--module-output needs a file}; shift ;;
	--deb-output) deb_output=${2:?--deb-output needs a directory}; shift ;;
	*) die "unknown argument '$1'" ;;
	esac
	shift
done

tarball=/usr/src/linux-source-6.12.tar.xz
[ -f "$tarball" ] ||
	die "$tarball missing: install linux-source-6.12 from bookworm-backports (scripts/setup-host.sh)"
source_version=$(dpkg-query -W -f='${Version}' linux-source-6.12)

patch_dir=$KSTALED_TOP/guest-kernel/patches
patches=()
add_series "$patch_dir"
[ -f "$patch_dir/series.driver" ] && add_series "$patch_dir" series.driver
fragments=("$KSTALED_TOP/guest-kernel/vm-guest.config" "$KSTALED_TOP/guest-kernel/kstaled.config")
[ "$variant" = no-kstaled ] && fragments+=("$KSTALED_TOP/guest-kernel/without-kstaled.config")
[ -z "$module_output$deb_output" ] || [ "$variant" = kstaled ] ||
	die "--module-output and --deb-output: only the kstaled variant has a driver module and packages"

hash=$(input_hash "linux-source-6.12 $source_version" "$variant" \
	"${patches[@]}" "${fragments[@]}" "$0")
out_dir=$KSTALED_CACHE/kernel-$variant-$hash

# check_config CONFIG FRAGMENT...: every option the fragments ask for (the
# last fragment to name an option wins) must be in the final config, so a
# misspelt option or an unmet dependency stops the build instead of
# silently producing a different kernel.
check_config() {
	local config=$1 missing
	shift
	missing=$(cat "$@" | sed -n 's/^\(CONFIG_[A-Za-z0-9_]*\)=\(.*\)$/\1 \2/p;
			s/^# \(CONFIG_[A-Za-z0-9_]*\) is not set$/\1 n/p' |
		awk '{ want[$1] = $2 } END { for (k in want) print k, want[k] }' |
		while read -r option value; do
			if [ "$value" = n ]; then
				grep -q "^$option=" "$config" && echo "$option=n"
			else
				grep -qx "$option=$value" "$config" || echo "$option=$value"
			fi
		done; true)
	[ -z "$missing" ] || die "kernel config did not take these options (dependency unmet or misspelt):
$missing"
}

build() {
	[ -f "$out_dir/bzImage" ] && return
	local work=$KSTALED_CACHE/kernel-work-$variant src build start
	src=$work/linux-source-6.12
	build=$work/build
	start=$(date +%s)
	rm -rf "$work"
	mkdir -p "$work"
	log "unpacking $tarball ($source_version)"
	tar --no-same-owner -xf "$tarball" -C "$work" || die "cannot unpack $tarball"
	log "applying ${#patches[@]} patches"
	apply_series "$src" "${patches[@]}"

	# A fixed work path plus CCACHE_BASEDIR let ccache hit across variants
	# and across rebuilds with changed patches.
	export CCACHE_BASEDIR=$work KBUILD_BUILD_TIMESTAMP="2026-01-01" \
		KBUILD_BUILD_USER=kstaled-vm KBUILD_BUILD_HOST=kstaled-vm
	local make=(make -C "$src" O="$build" ARCH=x86_64 CC="ccache gcc" -j"$(nproc)")
	"${make[@]}" -s x86_64_defconfig kvm_guest.config >/dev/null
	"$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" \
		"${fragments[@]}" >/dev/null
	"${make[@]}" -s olddefconfig
	check_config "$build/.config" "${fragments[@]}"
	local targets=(bzImage modules)
	# bindeb-pkg builds the image and modules, then packages them; the
	# packages are gzip-compressed, which every dpkg reads.
	[ "$variant" = kstaled ] && targets=(bindeb-pkg KDEB_COMPRESS=gzip)
	log "building ${targets[0]} ($variant)"
	if ! "${make[@]}" -s "${targets[@]}" >"$work/build.log" 2>&1; then
		tail -n 40 "$work/build.log" >&2
		die "kernel build failed ($variant); full log: $work/build.log"
	fi
	mkdir -p "$out_dir.tmp"
	cp "$build/arch/x86/boot/bzImage" "$build/.config" "$out_dir.tmp/"
	if [ "$variant" = kstaled ]; then
		cp "$build/drivers/virtio/virtio_kstaled.ko" "$out_dir.tmp/"
		mkdir "$out_dir.tmp/deb"
		# dpkg-buildpackage writes the packages next to the build tree.
		cp "$work"/linux-image-*.deb "$work"/linux-headers-*.deb \
			"$work"/linux-libc-dev_*.deb "$out_dir.tmp/deb/" ||
			die "make bindeb-pkg did not produce the expected packages in $work"
	fi
	rm -rf "$out_dir"
	mv "$out_dir.tmp" "$out_dir"
	# The object count is what a config change to the kernel's size shows in.
	log "built $out_dir/bzImage ($variant, $(find "$build" -name '*.o' | wc -l) objects)" \
		"in $(($(date +%s) - start)) s"
}

layer_build "kernel-$variant" "$out_dir/bzImage" build
[ -n "$output" ] && copy_output "$out_dir/bzImage" "$output"
[ -n "$module_output" ] && copy_output "$out_dir/virtio_kstaled.ko" "$module_output"
if [ -n "$deb_output" ]; then
	rm -rf "$deb_output"
	mkdir -p "$deb_output"
	for deb in "$out_dir"/deb/*.deb; do
		copy_output "$deb" "$deb_output/${deb##*/}"
	done
fi
echo "$out_dir/bzImage"
