#!/bin/sh
# kstaled-isolated: a folio that reclaim takes off the LRU for a moment
# and puts back keeps its age.  Under memory pressure reclaim isolates the
# coldest folios; those it cannot evict go back to the LRU, and kstaled
# may meet them while they are off it.  Here the guest has no swap and
# memload pages out its 16 MiB idle region over and over (MADV_PAGEOUT:
# the reclaim path isolates every folio, fails to swap it out and puts it
# back).  After 100 scans at scan_seconds=1 all the idle memory the last
# scan counted is in idle_60.  A folio found off the LRU is not counted,
# nor aged, in that scan; how many are off it when the scan passes
# depends on how the two threads interleave (a tenth to over a quarter of
# the region has been seen), so the last scan need only count half, and
# the folios need only have been found idle in 60 of the 100 scans.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-isolated
[ "$(wc -l </proc/swaps)" -eq 1 ] || fail "the guest has swap: $(cat /proc/swaps)"
activated() { awk '$1 == "pgactivate" { print $2 }' /proc/vmstat; }
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
start=$(activated)
memload_start /tmp/memload.log --cgroup $cg --size 16 --hot 0 --pageout \
	--period-ms 0
kstaled_wait_scans $cg 100
cat $cg/memory.idle_page_stats
# Each pass puts all 4096 folios back as active: the isolation did happen.
[ $(($(activated) - start)) -ge $((4096 * 100)) ] ||
	fail "reclaim put back only $(($(activated) - start)) folios"
idle=$(kstaled_idle $cg)
[ "$idle" -ge $((8 * MiB)) ] || fail "only $idle bytes of the 16 MiB region counted idle"
expect_near "idle_60" "$(kstaled_idle $cg 60)" "$idle" $((16 * MiB / 20))
