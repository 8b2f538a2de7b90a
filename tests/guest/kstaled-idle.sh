#!/bin/sh
# kstaled-idle: with scan_seconds=1, a cgroup holding 64 MiB of which
# 16 MiB stays hot shows 48 MiB +- 5 % idle after 3 scans.
set -e
cg=/sys/fs/cgroup/kstaled-idle
echo 1 > /sys/kernel/mm/kstaled/scan_seconds
memload --cgroup $cg --size 64 --hot 16 --kind anon --dirty --period-ms 200 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 2
stat() { awk -v k="$1" '$1 == k { print $2 }' $cg/memory.idle_page_stats; }
start=$(stat scans)
while [ $(( $(stat scans) - start )) -lt 3 ]; do sleep 1; done
cat $cg/memory.idle_page_stats
idle=$(( $(stat idle_clean) + $(stat idle_dirty_swap) ))
want=$((48 * 1024 * 1024))
lo=$((want * 95 / 100)); hi=$((want * 105 / 100))
echo "idle=$idle want=$want"
[ "$idle" -ge "$lo" ] && [ "$idle" -le "$hi" ]
