#!/bin/bash
# The main job, from a fresh Debian 12 machine, as root: install what is
# needed, build the patched guest kernel, QEMU and the guest image, boot a
# guest under libvirt running a changing workload, show its memory as the
# host sees it and move its balloon; the guest powers itself off when its
# workload ends.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"

"$KSTALED_TOP/scripts/setup-host.sh"
build_dir=${KSTALED_BUILD_DIR:-$KSTALED_TOP/build}
meson_build "$build_dir"
export KSTALED_KERNEL=$build_dir/bzImage KSTALED_QEMU=$build_dir/qemu-system-x86_64 \
	KSTALED_INITRAMFS=$build_dir/tests/initramfs.cpio.gz

domain=kstaled-demo
trap 'domain_destroy $domain; libvirt_stop' EXIT
libvirt_start
console=$(domain_start "$domain" 512 "kstaled_vm.run=demo-workload")
log "domain $domain started; guest console: $console"
wait_for_file_line "$console" '^KSTALED-VM-BOOTED' 120 || die "guest did not boot; see $console"
grep '^KSTALED-VM-BOOTED' "$console"

show_memory() {
	local stats
	stats=$(virsh_ dommemstat "$domain" | awk '{ v[$1] = $2 }
		END { printf "balloon %6d MiB  guest usable %6d MiB  unused %6d MiB",
			v["actual"] / 1024, v["usable"] / 1024, v["unused"] / 1024 }')
	printf '%s  %s  | %s\n' "$(date +%T)" "$stats" \
		"$(grep '^demo-workload' "$console" | tail -n 1)"
}

for _ in $(seq 10); do show_memory; sleep 3; done
log "setting the balloon to 384 MiB (virsh setmem --live)"
virsh_ setmem "$domain" 384M --live
for _ in $(seq 10); do show_memory; sleep 3; done

log "waiting for the workload to end and the guest to power off"
for _ in $(seq 90); do
	virsh_ domstate "$domain" >/dev/null 2>&1 || { log "guest powered off cleanly"; exit 0; }
	sleep 1
done
die "guest did not power off within 90 s of its workload's end"
