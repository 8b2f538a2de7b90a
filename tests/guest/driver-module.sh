#!/bin/sh
# driver-module: virtio_kstaled as a module (tests/test-driver-module.sh
# boots it with a device whose scan-seconds is 1).  Loaded into a guest
# whose memory is fragmented, it binds, applies the host's scan_seconds
# and sends reports the device reads whole (QEMU drops a report it cannot
# parse); removed, kstaled scans on without it; loaded again, it applies
# the host's setting again.  Prints the scan count at each step for the
# host to match against QEMU's trace.
. /guest/lib-kstaled.sh
scan_seconds=/sys/kernel/mm/kstaled/scan_seconds
driver=/sys/bus/virtio/drivers/virtio_kstaled
root=/sys/fs/cgroup

# load STEP: insmod, check the bind and the host's scan_seconds, wait for
# two scans (each one a report to the host).
load() {
	insmod /lib/modules/virtio_kstaled.ko || fail "insmod virtio_kstaled.ko failed"
	ls $driver | grep -q '^virtio[0-9]' || fail "virtio_kstaled bound no device: $(ls $driver)"
	wait_scan_seconds 1 10
	kstaled_wait_scans $root 2
	echo "driver-module: $1 at scan $(kstaled_stat $root scans)"
}

[ "$(cat $scan_seconds)" = 0 ] || fail "kstaled scans before the driver is loaded"
# Loaded late, the driver finds memory fragmented: its 1 MiB report
# buffer (the device's default max-report-size) cannot be one physically
# contiguous block, and the device must still read every report right.
fragment_memory 8
load loaded
kill $fragment_pid
rmmod virtio_kstaled || fail "rmmod virtio_kstaled failed"
[ ! -e $driver ] || fail "$driver still there after rmmod"
# kstaled's end-of-scan notifier must be gone with the module.
kstaled_wait_scans $root 3
echo "driver-module: removed at scan $(kstaled_stat $root scans)"
echo 0 >$scan_seconds
load reloaded
rmmod virtio_kstaled || fail "rmmod virtio_kstaled failed the second time"
if dmesg | grep -E 'BUG|WARNING|Oops|Call Trace'; then
	fail "the kernel log has a warning"
fi
