#!/bin/sh
# kstaled-compact: ages follow folios that compaction migrates.
# The guest boots as kstaled-hotplug's does, so that user memory goes to
# a ZONE_MOVABLE holding little else.  A 32 MiB region touched once sits
# in idle_5; /proc/sys/vm/compact_memory then moves most of its pages to
# other page frames (/proc/PID/pagemap tells how many): compaction's
# migration scanner walks up the zone and its free scanner down, and with
# the zone mostly free they meet near its top.  Two scans later the whole
# region is still in idle_5: the moved folios kept their ages, and the
# page frames they left did not keep a stale one.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-compact
idle_region_start $cg 32
# 5 scans old 6 scans after the first.
expect_region_idle $cg 8 "before compaction"

# Compaction moves folios only into page blocks partly in use, each into
# a free block of its own size: keep one page in every 2 MiB page block
# around the region and give back the rest.
fragment_memory 10 512
region_pfns /tmp/pfns.before
echo 1 >/proc/sys/vm/compact_memory
grep -E '^(compact_migrate_scanned|pgmigrate_success) ' /proc/vmstat
expect_region_moved /tmp/pfns.before compaction
expect_region_idle $cg 2 "after compaction"
