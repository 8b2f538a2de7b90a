#!/bin/sh
# kstaled-cgroups: idle memory is accounted to the cgroup that owns it.
# Cgroup a holds 64 MiB with 8 hot, cgroup b 32 MiB with 24 hot: after 3
# scans a shows 56 MiB and b 8 MiB idle, each +- 5 %.
. /guest/lib-kstaled.sh
a=/sys/fs/cgroup/kstaled-cgroups-a
b=/sys/fs/cgroup/kstaled-cgroups-b
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/a.log --cgroup $a --size 64 --hot 8 --period-ms 200
memload_start /tmp/b.log --cgroup $b --size 32 --hot 24 --period-ms 200
kstaled_wait_scans $a 3
kstaled_wait_scans $b 1
expect_near "idle in a" "$(kstaled_idle $a)" $((56 * MiB)) $((56 * MiB / 20))
expect_near "idle in b" "$(kstaled_idle $b)" $((8 * MiB)) $((8 * MiB / 20))
