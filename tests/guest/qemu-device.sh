#!/bin/sh
# qemu-device: the guest side of the libvirt tests in tests/qemu/.  Holds,
# in cgroup /e2e, 48 MiB of dirty anonymous memory (8 MiB of it kept hot)
# and a 32 MiB clean file on ext4 over a RAM disk, left idle: clean idle
# pages are what becomes stale.  It prints:
#   QEMU-DEVICE-STATS <memory.idle_page_stats on one line>   every 0.5 s
#   QEMU-DEVICE-SCAN-SECONDS N     at start and whenever the host changes
#                                  the scan period through the device
#   QEMU-DEVICE-STALE-PAGE-AGE N   the same for the stale page age
#   QEMU-DEVICE-ADMIN-SCAN-SECONDS 30  when the host set the scan period
#                                  to 9: the guest's administrator then
#                                  sets 30 in sysfs (a request for a
#                                  report must leave it so)
#   QEMU-DEVICE-TOUCHED            after signalling the file's memload to
#                                  touch all of it, which it does on every
#                                  change of the stale page age, so that
#                                  the host can make the stale memory drop
# It runs until the host destroys the guest.
. /guest/lib-kstaled.sh

cg=/sys/fs/cgroup/e2e
mkdir -p $cg
ramdisk_ext4
memload_start /tmp/anon.log --cgroup $cg --size 48 --hot 8 \
	--kind anon --dirty --period-ms 200
anon_pid=$memload_pid
memload_start /tmp/file.log --cgroup $cg --size 32 --hot 0 \
	--kind file --file /mnt/clean
file_pid=$memload_pid

# watch FILE KEY: print "QEMU-DEVICE-KEY value" (KEY's _ as -) when
# FILE's value changed since the last call; true if it did, except on the
# first call.
watch() {
	local now old
	now=$(cat "$1")
	eval "old=\${last_$2:-}"
	[ "$now" != "$old" ] || return 1
	eval "last_$2=\$now"
	echo "QEMU-DEVICE-$(echo "$2" | tr _ -) $now"
	[ -n "$old" ]
}

tick=0
while :; do
	if watch /sys/kernel/mm/kstaled/scan_seconds SCAN_SECONDS &&
		[ "$last_SCAN_SECONDS" = 9 ]; then
		echo 30 >/sys/kernel/mm/kstaled/scan_seconds
		echo "QEMU-DEVICE-ADMIN-SCAN-SECONDS 30"
	fi
	# memory.stale_page_age comes with the kernel's stale page count.
	if [ -f $cg/memory.stale_page_age ] &&
		watch $cg/memory.stale_page_age STALE_PAGE_AGE; then
		kill -USR1 "$file_pid"
		echo "QEMU-DEVICE-TOUCHED"
	fi
	if [ $((tick % 5)) -eq 0 ]; then
		echo "QEMU-DEVICE-STATS $(tr '\n' ' ' <$cg/memory.idle_page_stats)"
	fi
	tick=$((tick + 1))
	sleep 0.1
done
