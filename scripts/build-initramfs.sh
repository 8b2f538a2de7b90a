#!/bin/bash
# build-initramfs.sh OUTPUT INIT GUEST_DIR MODULE TOOL...
# Pack the guest initramfs: Debian's busybox-static, the init script, the
# in-guest scripts GUEST_DIR/*.sh (as /guest/), the kstaled kernel's
# virtio_kstaled.ko MODULE (as /lib/modules/) and the static guest tools.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -ge 4 ] || die "usage: build-initramfs.sh OUTPUT INIT GUEST_DIR MODULE TOOL..."
output=$1 init=$2 guest_dir=$3 module=$4
shift 4
[ -f "$module" ] || die "no driver module $module"

busybox=/bin/busybox
[ -x "$busybox" ] || die "$busybox missing: install busybox-static (scripts/setup-host.sh)"
is_static() { ! ldd "$1" >/dev/null 2>&1; }
is_static "$busybox" ||
	die "$busybox is not statically linked: install busybox-static, not busybox"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,dev,proc,sys,tmp,mnt,guest,etc,lib/modules}
cp "$busybox" "$root/bin/busybox"
install -m 0755 "$init" "$root/init"
cp "$guest_dir"/*.sh "$root/guest/"
cp "$module" "$root/lib/modules/virtio_kstaled.ko"
for tool in "$@"; do
	is_static "$tool" || die "guest tool $tool is not static"
	install -m 0755 "$tool" "$root/bin/"
done
(cd "$root" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --owner=0:0 --quiet) | gzip -9n >"$output.tmp"
mv "$output.tmp" "$output"
