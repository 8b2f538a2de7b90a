#!/bin/sh
# kstaled-v1: the same idle accounting under the cgroup v1 memory
# controller (booted with kstaled_vm.cgroup=v1): 64 MiB with 16 MiB hot
# shows 48 MiB +- 5 % idle after 3 scans.
. /guest/lib-kstaled.sh
root=/sys/fs/cgroup/memory
[ -f $root/memory.limit_in_bytes ] || fail "no cgroup v1 memory controller at $root"
cg=$root/kstaled-v1
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/memload.log --cgroup $cg --size 64 --hot 16 --period-ms 200
kstaled_wait_scans $cg 3
cat $cg/memory.idle_page_stats
expect_near "idle" "$(kstaled_idle $cg)" $((48 * MiB)) $((48 * MiB / 20))
