#!/bin/bash
# build-debian-image.sh [--kernel-debs DIR] [--output FILE]
# Build a bootable Debian 12 disk image from Debian's archive with
# mmdebstrap: systemd as init, a serial console, the kstaled kernel
# installed from its .deb ("apt install ./linux-image-*.deb", as a user
# does), swap on zram, the QEMU guest agent (how tests run commands in the
# guest), and real services from Debian's packages: redis-server, sqlite3,
# stress-ng.  The files in guest-image/rootfs/ are copied over the result.
# The disk is raw: an MBR with GRUB in the gap before the one ext4
# partition, which boots /vmlinuz (linked to the newest kernel installed)
# on ttyS0.  Built without mounting anything: mkfs.ext4 -d fills the
# filesystem from the tree, grub-mkimage writes the boot code.
# The kernel packages default to those of "build-kernel.sh" (kstaled
# variant).  Cached under $KSTALED_CACHE/debian-image-<hash>/disk.raw,
# keyed by the kernel packages, the overlay, the package list and this
# script; the path is printed on stdout (and --output FILE made a symbolic
# link to it: a copy of a disk costs seconds at every build).  Tests boot
# it through a copy-on-write overlay.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kernel_debs= output=
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel-debs) kernel_debs=${2:?--kernel-debs needs a directory}; shift ;;
	--output) output=${2:?--output needs a file}; shift ;;
	*) die "unknown argument '$1'" ;;
	esac
	shift
done
if [ -z "$kernel_debs" ]; then
	kernel=$("$KSTALED_TOP/scripts/build-kernel.sh") || die "the kernel packages could not be built"
	kernel_debs=${kernel%/*}/deb
fi
image_deb=$(compgen -G "$kernel_debs/linux-image-*-kstaled_*.deb" | grep -v -- -dbg_ || true)
[ -n "$image_deb" ] && [ "$(echo "$image_deb" | wc -l)" = 1 ] ||
	die "expected one linux-image-*-kstaled package in $kernel_debs, found: ${image_deb:-none}"

suite=bookworm
mirror=http://deb.debian.org/debian
# What a small Debian server has, plus what the tests and demo need.
packages=(
	systemd systemd-sysv udev dbus kmod procps e2fsprogs
	initramfs-tools linux-base zstd
	systemd-zram-generator qemu-guest-agent
	redis-server redis-tools sqlite3 stress-ng
)
disk_mib=3072
part_start_mib=1
overlay=$KSTALED_TOP/guest-image/rootfs
overlay_files=()
while IFS= read -r f; do overlay_files+=("$f"); done < <(find "$overlay" -type f | sort)

hash=$(input_hash "$suite $mirror ${packages[*]} $disk_mib" "$image_deb" \
	"${overlay_files[@]}" "$0")
out_dir=$KSTALED_CACHE/debian-image-$hash

# need_space DIR MIB: stop before a build that cannot fit, naming the place.
need_space() {
	local avail
	mkdir -p "$1"
	avail=$(df -Pm "$1" | awk 'NR == 2 { print $4 }')
	[ "$avail" -ge "$2" ] ||
		die "not enough space in $1: $avail MiB free, the image build needs $2 MiB"
}

# only_standard_fds COMMAND...: run COMMAND with every descriptor above 2
# closed (in a subshell, so the caller's stay open).
only_standard_fds() (
	for fd in /proc/$BASHPID/fd/*; do
		fd=${fd##*/}
		[ "$fd" -le 2 ] || eval "exec $fd>&-"
	done
	exec "$@"
)

build() {
	[ -f "$out_dir/disk.raw" ] && return
	local work=$KSTALED_CACHE/debian-image-work start
	start=$(date +%s)
	rm -rf "$work"
	need_space "$KSTALED_CACHE" $((disk_mib * 2))
	mkdir -p "$work/rootfs"
	cp "$image_deb" "$work/"
	log "building a Debian 12 tree with mmdebstrap (${#packages[@]} packages and ${image_deb##*/})"
	# The customize hooks run in the finished tree, /proc, /sys and /dev
	# mounted: the overlay, then the kernel package exactly as a user
	# installs it (its postinst builds the initramfs and the hook in the
	# overlay points /vmlinuz at it), then the test image's redis
	# settings: no snapshots (a fork would double its memory) and DEBUG
	# from local clients (POPULATE and DIGEST fill and check the data).
	# mmdebstrap hands apt "cat >&FD" for dash, which reads one digit
	# there: it must start with no descriptor open but 0, 1 and 2, or
	# what the caller left open pushes FD to 10 and apt fails.
	if ! only_standard_fds mmdebstrap --mode=root --variant=minbase --format=directory \
		--include="$(IFS=,; echo "${packages[*]}")" \
		--customize-hook="sync-in $overlay /" \
		--customize-hook="copy-in $work/${image_deb##*/} /tmp" \
		--customize-hook="chroot \"\$1\" apt-get install -y -q --no-install-recommends /tmp/${image_deb##*/}" \
		--customize-hook="rm \"\$1/tmp/${image_deb##*/}\"" \
		--customize-hook='printf "%s\n" "# kstaled-vm test image" "save \"\"" "enable-debug-command local" >>"$1/etc/redis/redis.conf"' \
		--customize-hook='chroot "$1" apt-get clean' \
		"$suite" "$work/rootfs" "$mirror" >"$work/mmdebstrap.log" 2>&1; then
		grep -E '^(E|W):|error|No space' "$work/mmdebstrap.log" | tail -n 20 >&2
		tail -n 5 "$work/mmdebstrap.log" >&2
		die "mmdebstrap failed building the Debian image; full log: $work/mmdebstrap.log"
	fi
	[ -L "$work/rootfs/vmlinuz" ] && [ -L "$work/rootfs/initrd.img" ] ||
		die "the kernel package did not install /vmlinuz and /initrd.img in the image"

	log "making the ext4 filesystem and the disk"
	local part=$work/part.ext4 disk=$work/disk.raw
	truncate -s $((disk_mib - part_start_mib))M "$part"
	mkfs.ext4 -q -F -L kstaled-root -d "$work/rootfs" "$part" >"$work/mkfs.log" 2>&1 ||
		{ cat "$work/mkfs.log" >&2; die "mkfs.ext4 could not fill the filesystem from $work/rootfs"; }
	truncate -s "${disk_mib}M" "$disk"
	echo "start=${part_start_mib}MiB, type=83, bootable" |
		sfdisk -q --label dos "$disk" >/dev/null || die "sfdisk could not partition $disk"
	dd if="$part" of="$disk" bs=1M seek=$part_start_mib conv=notrunc,sparse status=none ||
		die "cannot write the filesystem into $disk"
	# GRUB's boot sector (its first 440 bytes, before the partition table)
	# loads core.img from sector 1, in the gap before the partition; core
	# carries what it needs to read /boot/grub/grub.cfg on the partition.
	local grub=/usr/lib/grub/i386-pc
	grub-mkimage -O i386-pc -o "$work/core.img" -p '(hd0,msdos1)/boot/grub' \
		biosdisk part_msdos ext2 normal linux serial terminal echo test gzio ||
		die "grub-mkimage failed"
	[ "$(stat -c %s "$work/core.img")" -lt $((part_start_mib * 1024 * 1024 - 512)) ] ||
		die "GRUB's core.img does not fit before the partition"
	dd if="$grub/boot.img" of="$disk" bs=440 count=1 conv=notrunc status=none &&
		dd if="$work/core.img" of="$disk" bs=512 seek=1 conv=notrunc status=none ||
		die "cannot write GRUB into $disk"

	mkdir -p "$out_dir.tmp"
	mv "$disk" "$out_dir.tmp/disk.raw"
	cp "$work/mmdebstrap.log" "$out_dir.tmp/"
	rm -rf "$out_dir"
	mv "$out_dir.tmp" "$out_dir"
	rm -rf "$work"
	log "built $out_dir/disk.raw in $(($(date +%s) - start)) s"
}

layer_build debian-image "$out_dir/disk.raw" build
[ -n "$output" ] && ln -sfn "$out_dir/disk.raw" "$output"
echo "$out_dir/disk.raw"
