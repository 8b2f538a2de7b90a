#!/bin/sh
# kstaled-lazyfree: anonymous memory handed to madvise(MADV_FREE) is clean,
# since reclaim drops it without I/O unless it is written to again.  A
# cgroup holds 64 MiB of anonymous memory, 16 MiB of it kept hot and the
# other 48 MiB lazily freed: after 3 scans, 48 MiB +- 5 % is idle_clean
# and none of it idle_dirty_swap.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-lazyfree
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/memload.log --cgroup $cg --size 64 --hot 16 --lazyfree \
	--period-ms 200
kstaled_wait_scans $cg 3
cat $cg/memory.idle_page_stats
expect_near "idle_clean" "$(kstaled_stat $cg idle_clean)" $((48 * MiB)) $((48 * MiB / 20))
expect_below "idle_dirty_swap" "$(kstaled_stat $cg idle_dirty_swap)" $((2 * MiB))
