#!/bin/sh
# kstaled-scan-seconds: /sys/kernel/mm/kstaled/scan_seconds is the length
# of a full scan, and 0 stops scanning.  At 2, five scans take 10 s
# +- 5 % of /proc/uptime (kstaled paces itself by jiffies, which a NO_HZ
# kernel such as the defconfig's brings up to the clocksource at every
# tick); at 0, no scan is published for 5 s; back at 1, scanning resumes.
. /guest/lib-kstaled.sh
root=/sys/fs/cgroup
knob=/sys/kernel/mm/kstaled/scan_seconds
echo 2 >$knob
[ "$(cat $knob)" = 2 ] || fail "$knob reads $(cat $knob) after writing 2"
kstaled_wait_scans $root 1
start=$(uptime_ms)
kstaled_wait_scans $root 5
expect_near "ms for 5 scans at scan_seconds=2" $(($(uptime_ms) - start)) 10000 500

echo 0 >$knob
scans=$(kstaled_stat $root scans)
sleep 5
expect_near "scans published in 5 s at scan_seconds=0" $(($(kstaled_stat $root scans) - scans)) 0 0

echo 1 >$knob
kstaled_wait_scans $root 2
