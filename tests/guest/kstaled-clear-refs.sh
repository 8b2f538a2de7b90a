#!/bin/sh
# kstaled-clear-refs: /proc/PID/clear_refs does not hide references from
# kstaled.  Writing 1 to it clears the accessed bits of the process's
# pages, as a working set estimator outside the kernel does; a page
# touched since kstaled's last scan must still count as referenced.
# memload touches all of its 16 MiB every 100 ms while clear_refs is
# written every 50 ms: after 3 scans none of it is idle (< 5 %), where a
# clear_refs that consumed the bits unseen would leave most of it idle.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-clear-refs
size=$((16 * MiB))
memload_start /tmp/memload.log --cgroup $cg --size 16 --hot 16 --period-ms 100
memload=$tool_pid
while :; do echo 1 >/proc/$memload/clear_refs; sleep 0.05; done &
clearer=$!
trap 'kill $clearer $tool_pids 2>/dev/null' EXIT
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
kstaled_wait_scans $cg 3
grep '^idle_' $cg/memory.idle_page_stats | head -3
kill -0 $clearer || fail "the clear_refs writer died"
expect_below "memory touched every 100 ms under clear_refs, idle" "$(kstaled_idle $cg)" $((size / 20))
