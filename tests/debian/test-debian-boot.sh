#!/bin/bash
# The Debian 12 guest image boots under libvirt, from its disk, into the
# kstaled kernel installed from the project's package: systemd reaches
# multi-user.target with no failed unit, swap is on zram, udev loaded the
# virtio_kstaled module for the device, kstaled scans, the driver reports
# to the device, and redis-server answers.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/lib-debian.sh"

dom=kstaled-debian-boot
trap 'debian_destroy $dom; libvirt_stop' EXIT
libvirt_start
start=$SECONDS
debian_boot "$dom" 1024 >/dev/null
echo "booted to $(guest_sh "$dom" 'systemctl is-system-running') in $((SECONDS - start)) s"

release=$(guest_sh "$dom" 'uname -r')
echo "kernel: $release"
case "$release" in *-kstaled) ;; *) die "the guest runs $release, not the kstaled kernel" ;; esac
guest_sh "$dom" "dpkg-query -W -f='\${Package} \${Version} \${Status}\n' linux-image-$release" |
	tee /dev/stderr | grep -q ' install ok installed$' ||
	die "linux-image-$release is not installed as a package in the guest"
guest_sh "$dom" 'systemctl is-active multi-user.target' >/dev/null ||
	die "multi-user.target is not active"
failed=$(guest_sh "$dom" 'systemctl --failed --plain --no-legend')
[ -z "$failed" ] || die "failed units in the guest:
$failed
$(guest_sh "$dom" 'journalctl -b -p warning --no-pager | tail -n 40')"

guest_sh "$dom" 'swapon --show=NAME --noheadings' | grep -qx /dev/zram0 ||
	die "no zram swap in the guest: $(guest_sh "$dom" 'swapon --show')"
# The package ships the driver as a module; nothing but the device's
# modalias loads it.
guest_sh "$dom" 'cat /proc/modules' | grep -q '^virtio_kstaled ' ||
	die "udev did not load the virtio_kstaled module: $(guest_sh "$dom" 'cat /proc/modules')"
scan_seconds=$(guest_sh "$dom" 'cat /sys/kernel/mm/kstaled/scan_seconds')
[ "$scan_seconds" -ge 1 ] || die "kstaled is not scanning (scan_seconds $scan_seconds)"
[ "$(guest_sh "$dom" 'redis-cli ping')" = PONG ] || die "redis-server does not answer"
reports=$(virsh_ qemu-monitor-command "$dom" '{"execute":"query-kstaled"}' | jq '.return.reports')
[ "$reports" -ge 1 ] || die "the device has no report from the guest's driver"
echo "kstaled scans every $scan_seconds s; the device has $reports reports; redis answers"
