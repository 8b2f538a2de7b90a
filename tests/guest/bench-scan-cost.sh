#!/bin/sh
# bench-scan-cost (bench/section-1-scan-cost.sh boots it): CPU cost of
# scanning all guest memory, half of it filled with idle anonymous memory,
# by kstaled (kthread CPU over N full scans at scan_seconds=1), by a
# userspace page_idle pass (mark every pfn idle, read the bitmap back),
# N passes, and by DAMON (paddr, default intervals) over the same wall
# time as kstaled's N scans.  Times are in ticks (tick_ms), the clock CPU
# time is accounted in.  The three run one after the other, since
# each clears the accessed bits the others read.  Prints one line
# "BENCH {json}" of raw figures.  Kernel command line: kstaled_bench.scans=N.
. /guest/lib-kstaled.sh
scans=$(cmdline_param kstaled_bench.scans 10)
mem_kib=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)
set -- $(pfn_span)
span_pages=$(($2 - $1))
end_pfn=$2
cg=/sys/fs/cgroup/bench-scan-cost
memload_start /tmp/memload.log --cgroup $cg --size $((mem_kib / 2048)) --hot 0

echo "bench-scan-cost: kstaled, $scans scans"
# kstaled: the first scan after enabling it may be partial.
kstaled=$(kthread_pid kstaled)
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
kstaled_wait_scans $cg 1
ticks0=$(task_cpu_ticks $kstaled)
t0=$(tick_ms)
kstaled_wait_scans $cg "$scans"
kstaled_ticks=$(($(task_cpu_ticks $kstaled) - ticks0))
kstaled_ms=$(($(tick_ms) - t0))
echo 0 >/sys/kernel/mm/kstaled/scan_seconds

echo "bench-scan-cost: page_idle, $scans passes"
# page_idle: the bitmap has one bit per pfn below max_pfn, written and
# read in whole 8 byte words.  A write ending in max_pfn's partial word
# returns 0 for it, which a writer retries forever: leave that word out.
bitmap=/sys/kernel/mm/page_idle/bitmap
page_idle_pages=$((end_pfn / 64 * 64))
head -c $((page_idle_pages / 8)) /dev/zero | tr '\000' '\377' >/tmp/ones
ticks0=$(children_cpu_ticks)
i=0
while [ $i -lt "$scans" ]; do
	dd if=/tmp/ones of=$bitmap bs=4096 2>/dev/null
	dd if=$bitmap of=/dev/null bs=4096 2>/dev/null
	i=$((i + 1))
done
page_idle_ticks=$(($(children_cpu_ticks) - ticks0))

echo "bench-scan-cost: DAMON"
# DAMON over the same wall time.
damon_paddr_setup
echo on >$DAMON_ADMIN/state
kdamond=$(cat $DAMON_ADMIN/pid)
ticks0=$(task_cpu_ticks "$kdamond")
t0=$(tick_ms)
sleep $(((kstaled_ms + 999) / 1000))
damon_ticks=$(($(task_cpu_ticks "$kdamond") - ticks0))
damon_ms=$(($(tick_ms) - t0))
echo off >$DAMON_ADMIN/state

printf 'BENCH {"mem_kib": %d, "span_pages": %d, "scans": %d, "ticks_per_second": 100, ' \
	"$mem_kib" "$span_pages" "$scans"
printf '"kstaled": {"cpu_ticks": %d, "wall_ms": %d}, ' "$kstaled_ticks" "$kstaled_ms"
printf '"page_idle": {"passes": %d, "pages": %d, "cpu_ticks": %d}, ' \
	"$scans" "$page_idle_pages" "$page_idle_ticks"
printf '"damon": {"cpu_ticks": %d, "wall_ms": %d}}\n' "$damon_ticks" "$damon_ms"
