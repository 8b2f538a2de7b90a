#!/bin/sh
# kstaled-stale: the stale count follows accesses at once, not at the
# next scan.  Two clean 16 MiB files on ext4 over /dev/ram0, untouched,
# in two cgroups with memory.stale_page_age 2: after 4 scans all of each
# is stale.  Scans are then slowed to one per 60 s; one file is read(2)
# once, the other written through memload's mapping: both cgroups' stale
# count drops below 5 % of the file while the scan in progress has not
# finished.
. /guest/lib-kstaled.sh
read_cg=/sys/fs/cgroup/kstaled-stale-read
write_cg=/sys/fs/cgroup/kstaled-stale-write
size=$((16 * MiB))
tolerance=$((size / 20))
# No periodic writeback: the written file stays dirty, so not stale again.
echo 0 >/proc/sys/vm/dirty_writeback_centisecs
ramdisk_ext4
for cg in $read_cg $write_cg; do
	mkdir -p $cg
	echo 2 >$cg/memory.stale_page_age
	[ "$(cat $cg/memory.stale_page_age)" = 2 ] || fail "$cg/memory.stale_page_age does not read back 2"
done
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/read.log --cgroup $read_cg --size 16 --hot 0 --kind file --file /mnt/read
# --dirty writes the file through its mapping (then, on SIGUSR1, again);
# sync makes it clean, and write-protects it, before it can go stale.
memload_start /tmp/write.log --cgroup $write_cg --size 16 --hot 0 --kind file --file /mnt/write --dirty
sync
kstaled_wait_scans $write_cg 4
for cg in $read_cg $write_cg; do
	expect_near "$cg stale before the touch" "$(kstaled_stat $cg stale)" $size $tolerance
done

echo 60 >/sys/kernel/mm/kstaled/scan_seconds
scans=$(kstaled_stat $write_cg scans)
cat /mnt/read >/dev/null
kill -USR1 $memload_pid
until grep -q '^memload: touched all' /tmp/write.log; do sleep 0.1; done
read_stale=$(kstaled_stat $read_cg stale)
write_stale=$(kstaled_stat $write_cg stale)
[ "$(kstaled_stat $write_cg scans)" -eq "$scans" ] ||
	fail "a scan finished during the touch: cannot tell the hooks from the scanner"
expect_below "stale right after read(2)" "$read_stale" $tolerance
expect_below "stale right after writing through the mapping" "$write_stale" $tolerance
