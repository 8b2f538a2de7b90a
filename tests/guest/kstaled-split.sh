#!/bin/sh
# kstaled-split: a huge page's split passes its age on.  64 MiB of
# THP-backed anonymous memory touched once sits in idle_5; splitting its
# huge pages (split_huge_pages in debugfs) leaves 4 KiB folios.  Two
# scans later the whole region is still in idle_5: every folio split off
# inherited the huge page's age instead of starting over.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-split
echo always >/sys/kernel/mm/transparent_hugepage/enabled
idle_region_start $cg 64
# No new huge pages: khugepaged would collapse the split pages again.
echo never >/sys/kernel/mm/transparent_hugepage/enabled
thp() { awk '$1 == "anon_thp" { print $2 }' $cg/memory.stat; }
[ "$(thp)" -ge $((60 * MiB)) ] || fail "only $(thp) bytes of the 64 MiB are transparent huge pages"
# 5 scans old 6 scans after the first.
expect_region_idle $cg 8 "before the split"

mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
printf '%d,%#x,%#x\n' "$memload_pid" "$region_addr" $((region_addr + region)) \
	>/sys/kernel/debug/split_huge_pages
[ "$(thp)" -lt $((4 * MiB)) ] || fail "$(thp) bytes are still huge pages after the split"
expect_region_idle $cg 2 "after the split"
