# Helpers for building Debian's linux-source-6.12 with Debian's own amd64
# config (rather than the guests' defconfig), with or without the series;
# sourced by the scripts that need them (it sources lib.sh), never run.
# shellcheck shell=bash source-path=SCRIPTDIR

# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

debian_kernel_tarball=/usr/src/linux-source-6.12.tar.xz
# Source trees, build trees and the config, at fixed paths: ccache then
# hits across a re-unpack (a changed patch) as it does for build-kernel.sh.
debian_kernel_root=$KSTALED_CACHE/debian-kernel

# debian_kernel_version: the installed linux-source-6.12's version, which
# is also the version of the linux-config-6.12 that matches it (both are
# built from the same source package).
debian_kernel_version() {
	[ -f "$debian_kernel_tarball" ] ||
		die "$debian_kernel_tarball missing: install linux-source-6.12 from bookworm-backports (scripts/setup-host.sh)"
	dpkg-query -W -f='${Version}' linux-source-6.12
}

# debian_kernel_series: append the series (and series.driver) to the array
# "patches", as build-kernel.sh applies them.
debian_kernel_series() {
	local dir=$KSTALED_TOP/guest-kernel/patches
	add_series "$dir"
	[ -f "$dir/series.driver" ] && add_series "$dir" series.driver
	return 0
}

# debian_kernel_config VERSION: print the path of Debian's amd64 config of
# linux VERSION (config.amd64_none_amd64 of the linux-config-6.12 package,
# decompressed), downloading the package once per version.
debian_kernel_config() {
	local version=$1 dir config
	dir=$debian_kernel_root/config/$version
	config=$dir/config.amd64_none_amd64
	[ -f "$config" ] || with_lock debian-kernel-config _debian_kernel_download "$version" "$dir"
	[ -f "$config" ] || die "no $config after downloading linux-config-6.12 $version"
	echo "$config"
}

_debian_kernel_download() {
	local version=$1 dir=$2 tmp out deb
	[ -f "$dir/config.amd64_none_amd64" ] && return
	tmp=$(mktemp -d)
	# apt fetches as _apt when it can write there (no "unsandboxed" warning).
	chown _apt "$tmp" 2>/dev/null || true
	if ! out=$(cd "$tmp" && apt-get download -q "linux-config-6.12=$version" 2>&1); then
		rm -rf "$tmp"
		echo "$out" >&2
		die "apt-get download linux-config-6.12=$version failed: run scripts/setup-host.sh (it refreshes apt's lists), and if bookworm-backports has moved past $version, upgrade linux-source-6.12 too"
	fi
	deb=$(echo "$tmp"/linux-config-6.12_*.deb)
	mkdir -p "$dir"
	if ! dpkg-deb --fsys-tarfile "$deb" |
		tar -xO ./usr/src/linux-config-6.12/config.amd64_none_amd64.xz |
		xz -dc >"$dir/config.tmp"; then
		rm -rf "$tmp" "$dir/config.tmp"
		die "no config.amd64_none_amd64.xz in ${deb##*/}"
	fi
	rm -rf "$tmp"
	mv "$dir/config.tmp" "$dir/config.amd64_none_amd64"
	log "Debian's amd64 config of $version in $dir"
}

# debian_kernel_tree plain|kstaled: print the path of linux-source-6.12
# unpacked, as is (plain) or with the series applied (kstaled), unpacking
# it again only when the source version or a patch changed.  The caller
# holds the lock debian-kernel-VARIANT (with_lock) while it uses the tree
# and its build tree.
debian_kernel_tree() {
	local variant=$1 version key dir patches=()
	version=$(debian_kernel_version)
	case "$variant" in
	plain) ;;
	kstaled) debian_kernel_series ;;
	*) die "debian_kernel_tree: unknown variant '$variant'" ;;
	esac
	key=$(input_hash "linux-source-6.12 $version" "${patches[@]}")
	dir=$debian_kernel_root/src-$variant
	if [ "$(cat "$dir.key" 2>/dev/null)" != "$key" ]; then
		log "unpacking $debian_kernel_tarball ($version, $variant)"
		rm -rf "$dir" "$dir.tmp" "$dir.key"
		mkdir -p "$dir.tmp"
		tar --no-same-owner -xf "$debian_kernel_tarball" -C "$dir.tmp" ||
			die "cannot unpack $debian_kernel_tarball"
		if [ ${#patches[@]} -gt 0 ]; then
			log "applying ${#patches[@]} patches"
			apply_series "$dir.tmp/linux-source-6.12" "${patches[@]}"
		fi
		mv "$dir.tmp" "$dir"
		echo "$key" >"$dir.key"
	fi
	echo "$dir/linux-source-6.12"
}

# debian_kernel_build_dir plain|kstaled: the O= build tree of that variant,
# shared by every script that configures it with debian_kernel_configure.
debian_kernel_build_dir() {
	echo "$debian_kernel_root/build-$1"
}

# debian_kernel_make SRC BUILD ARG...: make in SRC's tree, output in BUILD,
# with ccache when it is installed.
debian_kernel_make() {
	local src=$1 build=$2 cc=gcc
	shift 2
	command -v ccache >/dev/null && cc="ccache gcc"
	CCACHE_BASEDIR=$debian_kernel_root \
		make -C "$src" O="$build" ARCH=x86_64 CC="$cc" -j"$(nproc)" "$@"
}

# debian_kernel_configure SRC BUILD plain|kstaled: BUILD/.config is
# Debian's amd64 config without debug information, through "make
# olddefconfig", for kstaled with what the series adds on top: kstaled
# built in, its driver as a module, as a distribution would ship them;
# each of those must survive olddefconfig.
# Skipped when neither the tree (its key, from debian_kernel_tree), the
# config, the options nor the tools olddefconfig asks about (gcc, pahole)
# changed, so a configured tree is not rebuilt.
debian_kernel_configure() {
	local src=$1 build=$2 variant=$3 config key option options=()
	config=$(debian_kernel_config "$(debian_kernel_version)")
	options=(DEBUG_INFO_NONE=y)
	[ "$variant" = kstaled ] && options+=(KSTALED=y VIRTIO_KSTALED=m)
	key=$(input_hash "$(cat "${src%/*}.key")" "$config" "${options[@]}" \
		"$(gcc --version | head -n 1)" "pahole $(pahole --version 2>/dev/null || true)")
	[ -f "$build/.config" ] && [ "$(cat "$build/.kstaled-config-key" 2>/dev/null)" = "$key" ] &&
		return
	log "configuring $build (Debian's amd64 config${options[*]:+ + ${options[*]}})"
	mkdir -p "$build"
	rm -f "$build/.kstaled-config-key"
	cp "$config" "$build/.config"
	# Without debug information (DEBUG_INFO_NONE, below, is the other
	# choice): gcc takes about a quarter longer with it, and DWARF and BTF
	# change neither the code nor the warnings the scripts check.
	"$src/scripts/config" --file "$build/.config" \
		--disable DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT
	for option in "${options[@]}"; do
		"$src/scripts/config" --file "$build/.config" --set-val "${option%%=*}" "${option#*=}"
	done
	debian_kernel_make "$src" "$build" -s olddefconfig >/dev/null
	for option in "${options[@]}"; do
		grep -qx "CONFIG_$option" "$build/.config" ||
			die "Debian's config did not take CONFIG_$option (dependency unmet or misspelt)"
	done
	echo "$key" >"$build/.kstaled-config-key"
}
