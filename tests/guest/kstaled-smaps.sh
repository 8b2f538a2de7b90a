#!/bin/sh
# kstaled-smaps: /proc/PID/smaps still sees the references kstaled
# consumed.  A 32 MiB region is touched once; kstaled's scans clear its
# accessed bits and set PG_young instead, which smaps counts, so after 3
# scans the process's Referenced memory still covers the region.  Writing
# 1 to /proc/PID/clear_refs then clears PG_young too: Referenced drops
# below 4 MiB (the rest of the process), which shows the check can fail.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-smaps
idle_region_start $cg 32
referenced() {
	awk '$1 == "Referenced:" { print $2 * 1024 }' "/proc/$memload_pid/smaps_rollup"
}
kstaled_wait_scans $cg 3
cat $cg/memory.idle_page_stats
expect_near "idle after 3 scans" "$(kstaled_idle $cg)" $region $tolerance
got=$(referenced)
echo "Referenced in smaps after kstaled consumed the accessed bits: got $got, want >= $((region - tolerance))"
[ "$got" -ge $((region - tolerance)) ] ||
	fail "smaps shows $got bytes referenced: it lost the references kstaled consumed"
echo 1 >"/proc/$memload_pid/clear_refs"
expect_below "Referenced in smaps after clear_refs" "$(referenced)" $((4 * MiB))
