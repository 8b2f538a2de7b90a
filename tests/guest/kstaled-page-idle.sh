#!/bin/sh
# kstaled-page-idle: the page_idle bitmap keeps working while kstaled
# scans the same pages.  Mark all of a 16 MiB region idle, let memload
# touch its first 4 MiB through 2 kstaled scans: the touched pages have
# lost their idle bit and only they, and kstaled still sees 12 MiB idle.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-page-idle
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/memload.log --cgroup $cg --size 16 --hot 4 --period-ms 100
pid=$memload_pid
addr=$(sed -n 's/.* addr=\(0x[0-9a-f]*\).*/\1/p' /tmp/memload.log)
hot=$((4 * MiB)) cold=$((12 * MiB))

pagestate --mark-idle $pid "$addr" $((16 * MiB))
kstaled_wait_scans $cg 2
hot_state=$(pagestate $pid "$addr" $hot)
cold_state=$(pagestate $pid $((addr + hot)) $cold)
echo "hot: $hot_state"
echo "cold: $cold_state"
[ "$(pagestate_field "$hot_state" present)" -eq $((hot / 4096)) ] || fail "hot pages missing"
[ "$(pagestate_field "$cold_state" present)" -eq $((cold / 4096)) ] || fail "cold pages missing"
expect_near "idle bits of touched pages" "$(pagestate_field "$hot_state" idle)" 0 0
expect_near "idle bits of untouched pages" "$(pagestate_field "$cold_state" idle)" \
	$((cold / 4096 - $(pagestate_field "$cold_state" untracked))) 0
expect_near "kstaled idle" "$(kstaled_idle $cg)" $cold $((cold / 20))
