#!/bin/bash
# The build scripts stop with a message that names what failed: a patch
# that does not apply, a series naming a missing patch, a download that
# fails, and KVM asked for where there is none.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# expect_failure PATTERN CMD...: CMD must fail and say PATTERN.
expect_failure() {
	local pattern=$1 out
	shift
	if out=$("$@" 2>&1); then
		die "'$*' succeeded; expected a failure saying '$pattern'"
	fi
	echo "$out" | grep -qE "$pattern" ||
		die "'$*' failed without saying '$pattern':
$out"
	echo "ok: $(echo "$out" | grep -E "$pattern" | head -n 1)"
}

# A private copy of the tree, so the real series and cache stay untouched.
tree=$scratch/tree
mkdir -p "$tree"
cp -r "$KSTALED_TOP/scripts" "$KSTALED_TOP/guest-kernel" "$KSTALED_TOP/qemu-device" "$tree/"
real_cache=$KSTALED_CACHE
export KSTALED_CACHE=$scratch/cache

echo "0099-missing.patch" >>"$tree/guest-kernel/patches/series"
expect_failure 'series lists 0099-missing.patch, which does not exist' \
	bash "$tree/scripts/build-kernel.sh"

cat >"$tree/qemu-device/patches/9999-does-not-apply.patch" <<'PATCH'
--- a/VERSION
+++ b/VERSION
@@ -1 +1 @@
-1.2.3
+1.2.4
PATCH
echo "9999-does-not-apply.patch" >>"$tree/qemu-device/patches/series"
mkdir -p "$KSTALED_CACHE/downloads"
ln -s "$real_cache/downloads/qemu_10.0.2+ds.orig.tar.xz" "$KSTALED_CACHE/downloads/"
expect_failure 'patch qemu-device/patches/9999-does-not-apply.patch does not apply' \
	bash "$tree/scripts/build-qemu.sh"

rm -f "$KSTALED_CACHE/downloads/qemu_10.0.2+ds.orig.tar.xz"
# Port 9 on loopback refuses at once: a download that cannot happen.
expect_failure 'download of http://deb.debian.org/.*qemu_10.0.2.*failed' \
	env http_proxy=http://127.0.0.1:9 bash "$tree/scripts/build-qemu.sh"

expect_failure 'KSTALED_ACCEL=kvm but /dev/kvm does not exist' \
	unshare -m bash -c 'mount -t tmpfs none /dev && KSTALED_ACCEL=kvm "$0" boot-check' \
	"$KSTALED_TOP/tests/run-guest.sh"
expect_failure 'KSTALED_ACCEL=kvmm: expected tcg or kvm' \
	env KSTALED_ACCEL=kvmm "$KSTALED_TOP/tests/run-guest.sh" boot-check

# The Debian image: a package download that fails, and a cache without
# room for the image.  The kernel package is only named here: both stop
# before it is installed.
debs=$scratch/debs
mkdir -p "$debs"
: >"$debs/linux-image-6.12.0-kstaled_6.12.0-kstaled-1_amd64.deb"
cp -r "$KSTALED_TOP/guest-image" "$tree/"
expect_failure 'mmdebstrap failed building the Debian image' \
	env http_proxy=http://127.0.0.1:9 bash "$tree/scripts/build-debian-image.sh" --kernel-debs "$debs"
fetch=$(grep -m1 -E "Failed to fetch|Could not connect" "$KSTALED_CACHE/debian-image-work/mmdebstrap.log") ||
	die "the image build's log does not name the download that failed"
echo "ok: its log names it: $fetch"
expect_failure 'not enough space in .*: [0-9]+ MiB free, the image build needs [0-9]+ MiB' \
	unshare -m bash -c 'mount -t tmpfs -o size=64m none "$KSTALED_CACHE" &&
		bash "$0" --kernel-debs "$1"' "$tree/scripts/build-debian-image.sh" "$debs"
