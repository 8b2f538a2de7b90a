#!/bin/sh
# kstaled-kpageflags: /proc/kpageflags shows which pages kstaled counts
# as stale.  A 16 MiB clean file on ext4 over /dev/ram0, its first 4 MiB
# hot, memory.stale_page_age 2: after 4 scans KPF_STALE is set on every
# page of the cold 12 MiB and on none of the hot 4 MiB, and clears on all
# of them once the file is read(2).
. /guest/lib-kstaled.sh
KPF_STALE=27	# include/uapi/linux/kernel-page-flags.h
cg=/sys/fs/cgroup/kstaled-kpageflags
ramdisk_ext4
mkdir -p $cg
echo 2 >$cg/memory.stale_page_age
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/memload.log --cgroup $cg --size 16 --hot 4 --kind file --file /mnt/data
pid=$memload_pid
addr=$(sed -n 's/.* addr=\(0x[0-9a-f]*\).*/\1/p' /tmp/memload.log)
hot=$((4 * MiB)) cold=$((12 * MiB))
kstaled_wait_scans $cg 4

hot_state=$(pagestate --kpf $KPF_STALE $pid "$addr" $hot)
cold_state=$(pagestate --kpf $KPF_STALE $pid $((addr + hot)) $cold)
echo "hot: $hot_state"
echo "cold: $cold_state"
[ "$(pagestate_field "$cold_state" present)" -eq $((cold / 4096)) ] || fail "cold pages missing"
expect_near "stale hot pages" "$(pagestate_field "$hot_state" kpf$KPF_STALE)" 0 0
expect_near "stale cold pages" "$(pagestate_field "$cold_state" kpf$KPF_STALE)" $((cold / 4096)) 0

cat /mnt/data >/dev/null
cold_state=$(pagestate --kpf $KPF_STALE $pid $((addr + hot)) $cold)
echo "cold after the read: $cold_state"
expect_near "stale cold pages after the read" "$(pagestate_field "$cold_state" kpf$KPF_STALE)" 0 0
