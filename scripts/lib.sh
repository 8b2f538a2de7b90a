# Shared helpers for kstaled-vm's build scripts; sourced, not run.
# shellcheck shell=bash

KSTALED_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Everything built or downloaded lives here, outside the checkout.
KSTALED_CACHE=${KSTALED_CACHE:-/var/cache/kstaled-vm}
export CCACHE_DIR=${CCACHE_DIR:-$KSTALED_CACHE/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
# Depend mode hashes the headers the compiler lists instead of running the
# preprocessor first, so a miss (every file of a cold build) compiles once.
# The price: a changed header misses every file that reads it, and every
# kernel file reads the generated autoconf.h, so a kernel config change
# rebuilds the whole kernel.
export CCACHE_DEPEND=${CCACHE_DEPEND:-1}

die() {
	echo "${0##*/}: error: $*" >&2
	exit 1
}

log() {
	echo "${0##*/}: $*" >&2
}

# input_hash FILE|STRING...: one sha256 over the contents of every argument
# that is a file and the text of every argument that is not.  The cache key
# of a build: it changes exactly when one of its inputs does.
input_hash() {
	local arg
	for arg in "$@"; do
		if [ -f "$arg" ]; then
			printf 'file %s\n' "${arg##*/}"
			cat "$arg"
		else
			printf 'text %s\n' "$arg"
		fi
	done | sha256sum | cut -c1-16
}

# add_series DIR [SERIES]: append to the array "patches" the files that
# DIR/SERIES (default "series") lists, in order, checking that each exists.
# Blank lines and #-comments are skipped, as quilt does.  It fills an array
# rather than printing, so that its die() stops the caller.
add_series() {
	local dir=$1 series=${2:-series} name
	[ -f "$dir/$series" ] || die "no $series file in $dir"
	while read -r name _; do
		case "$name" in "" | "#"*) continue ;; esac
		[ -f "$dir/$name" ] || die "$dir/$series lists $name, which does not exist"
		patches+=("$dir/$name")
	done <"$dir/$series"
}

# apply_series SRCDIR PATCH...: apply each patch with no fuzz, stopping at
# the first one that does not apply and naming it.
apply_series() {
	local src=$1 patch
	shift
	for patch in "$@"; do
		if ! out=$(patch -d "$src" -p1 --batch --forward --fuzz=0 <"$patch" 2>&1); then
			echo "$out" >&2
			die "patch ${patch#"$KSTALED_TOP"/} does not apply to $src"
		fi
	done
}

# with_lock NAME CMD...: run CMD holding an exclusive lock, so that two
# builds of the same layer (meson, a test, a user) never share a work tree.
# CMD must itself check whether the work is still to be done.
with_lock() {
	local name=$1
	shift
	mkdir -p "$KSTALED_CACHE/locks"
	(
		flock 9
		"$@"
	) 9>"$KSTALED_CACHE/locks/$name.lock"
}

# layer_build NAME DONE_FILE CMD...: build the cached layer NAME with CMD
# under the lock NAME unless DONE_FILE exists, and say in the run's layer
# log, when scripts/test.sh asks for one ($KSTALED_LAYER_LOG), whether the
# layer was cold (built now, and in how long) or warm (from the cache).
layer_build() {
	local name=$1 done_file=$2 start=$SECONDS state=warm
	shift 2
	if [ ! -e "$done_file" ]; then
		with_lock "$name" "$@"
		state="cold, $((SECONDS - start)) s"
	fi
	if [ -n "${KSTALED_LAYER_LOG:-}" ]; then
		echo "$name: $state" >>"$KSTALED_LAYER_LOG"
	fi
}

# copy_output SOURCE DEST: copy a built artifact to a user's path by
# rename, so that a QEMU or a boot still running the old file keeps it
# (cp over a running binary fails with "Text file busy").
copy_output() {
	local tmp
	tmp=$(mktemp "$2.XXXXXX") || die "cannot write next to $2"
	cp "$1" "$tmp" && chmod --reference="$1" "$tmp" && mv -f "$tmp" "$2" ||
		{ rm -f "$tmp"; die "cannot copy $1 to $2"; }
}

# The built artifacts, as meson's test environment passes them; a plain
# shell user gets the same through the build scripts (cached, so cheap).
guest_qemu() {
	local qemu=${KSTALED_QEMU:-}
	[ -n "$qemu" ] || qemu=$("$KSTALED_TOP/scripts/build-qemu.sh")
	[ -x "$qemu" ] || die "QEMU $qemu is not executable"
	echo "$qemu"
}

guest_kernel() {
	local kernel=${KSTALED_KERNEL:-}
	[ -n "$kernel" ] || kernel=$("$KSTALED_TOP/scripts/build-kernel.sh")
	[ -f "$kernel" ] || die "kernel $kernel does not exist"
	echo "$kernel"
}

guest_initramfs() {
	local initramfs=${KSTALED_INITRAMFS:-}
	[ -n "$initramfs" ] || die "KSTALED_INITRAMFS is not set: build with meson (see README)"
	[ -f "$initramfs" ] || die "initramfs $initramfs does not exist"
	echo "$initramfs"
}

# guest_accel_args: TCG unless KSTALED_ACCEL=kvm asks for KVM, which then
# must really be there: no silent fallback to TCG.
guest_accel_args() {
	case "${KSTALED_ACCEL:-tcg}" in
	tcg) echo "-accel tcg" ;;
	kvm)
		[ -c /dev/kvm ] || die "KSTALED_ACCEL=kvm but /dev/kvm does not exist"
		[ -r /dev/kvm ] && [ -w /dev/kvm ] || die "KSTALED_ACCEL=kvm but /dev/kvm is not accessible"
		echo "-accel kvm -cpu host"
		;;
	*) die "KSTALED_ACCEL=${KSTALED_ACCEL}: expected tcg or kvm" ;;
	esac
}

# meson_build DIR: configure (or reconfigure) the meson build directory DIR
# for this checkout and build everything in it: the entry point shared by
# the test, demo and benchmark commands.
meson_build() {
	local build_dir=$1
	# /usr/bin/meson is backports' (>= 1.5); never a pip one first on PATH.
	if [ -f "$build_dir/build.ninja" ]; then
		/usr/bin/meson setup --reconfigure "$build_dir" "$KSTALED_TOP" >/dev/null
	else
		/usr/bin/meson setup "$build_dir" "$KSTALED_TOP" >/dev/null
	fi
	/usr/bin/meson compile -C "$build_dir"
}
