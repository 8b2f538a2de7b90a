#!/bin/sh
# kstaled-mlock: mlocked memory is never idle.  Two untouched 32 MiB
# regions in two cgroups, one of them mlocked: after 3 scans the other
# one is idle (so the scanner did run over both) and the locked one not.
. /guest/lib-kstaled.sh
locked=/sys/fs/cgroup/kstaled-mlock-locked
unlocked=/sys/fs/cgroup/kstaled-mlock-unlocked
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/locked.log --cgroup $locked --size 32 --hot 0 --mlock
memload_start /tmp/unlocked.log --cgroup $unlocked --size 32 --hot 0
kstaled_wait_scans $locked 3
cat $locked/memory.idle_page_stats
expect_near "idle unlocked" "$(kstaled_idle $unlocked)" $((32 * MiB)) $((32 * MiB / 20))
expect_below "idle mlocked" "$(kstaled_idle $locked)" $MiB
