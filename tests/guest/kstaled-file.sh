#!/bin/sh
# kstaled-file: idle page cache is classified by whether writing it back
# is needed.  On ext4 over a RAM disk (block-backed, unlike tmpfs), a
# 16 MiB file only read shows in idle_clean and a 16 MiB file written
# through its mapping in idle_dirty_file, each +- 5 %; once written back
# (sync), the dirty one moves to idle_clean.  Shared memory (a memfd) is
# page cache too, but swap-backed: it shows in idle_dirty_swap.
. /guest/lib-kstaled.sh
clean=/sys/fs/cgroup/kstaled-file-clean
dirty=/sys/fs/cgroup/kstaled-file-dirty
shmem=/sys/fs/cgroup/kstaled-file-shmem
size=$((16 * MiB))
tolerance=$((size / 20))
# No periodic writeback: only the sync below cleans the dirty file.
echo 0 >/proc/sys/vm/dirty_writeback_centisecs
ramdisk_ext4
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/clean.log --cgroup $clean --size 16 --hot 0 --kind file --file /mnt/clean
memload_start /tmp/dirty.log --cgroup $dirty --size 16 --hot 0 --kind file --file /mnt/dirty --dirty
memload_start /tmp/shmem.log --cgroup $shmem --size 16 --hot 0 --kind shmem
kstaled_wait_scans $dirty 3
for cg in $clean $dirty $shmem; do
	echo "$cg:"
	grep '^idle_' $cg/memory.idle_page_stats | head -3
done
expect_near "clean file, idle_clean" "$(kstaled_stat $clean idle_clean)" $size $tolerance
expect_below "clean file, idle_dirty_file" "$(kstaled_stat $clean idle_dirty_file)" $tolerance
expect_near "dirty file, idle_dirty_file" "$(kstaled_stat $dirty idle_dirty_file)" $size $tolerance
expect_below "dirty file, idle_clean" "$(kstaled_stat $dirty idle_clean)" $tolerance
expect_near "shmem, idle_dirty_swap" "$(kstaled_stat $shmem idle_dirty_swap)" $size $tolerance
expect_below "shmem, idle_clean + idle_dirty_file" \
	$(($(kstaled_stat $shmem idle_clean) + $(kstaled_stat $shmem idle_dirty_file))) $tolerance
for cg in $clean $dirty; do
	expect_below "$cg idle_dirty_swap" "$(kstaled_stat $cg idle_dirty_swap)" $tolerance
done

sync
kstaled_wait_scans $dirty 2
expect_near "written back file, idle_clean" "$(kstaled_stat $dirty idle_clean)" $size $tolerance
expect_below "written back file, idle_dirty_file" "$(kstaled_stat $dirty idle_dirty_file)" $tolerance
