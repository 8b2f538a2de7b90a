#!/bin/sh
# kstaled-thp: a transparent huge page counts for its whole size.  64 MiB
# of THP-backed anonymous memory, 16 MiB of it hot: after 3 scans 48 MiB
# +- 5 % is idle, as with small pages.  THP is enabled for every mapping
# rather than through memload --thp: the tiny guest kernel has no
# madvise(2) (CONFIG_ADVISE_SYSCALLS).
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-thp
echo always >/sys/kernel/mm/transparent_hugepage/enabled
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/memload.log --cgroup $cg --size 64 --hot 16 --period-ms 200
# Without huge pages this would test nothing: make sure they are there.
thp=$(awk '$1 == "anon_thp" { print $2 }' $cg/memory.stat)
[ "$thp" -ge $((60 * MiB)) ] || fail "only $thp bytes of the 64 MiB are transparent huge pages"
kstaled_wait_scans $cg 3
cat $cg/memory.idle_page_stats
expect_near "idle" "$(kstaled_idle $cg)" $((48 * MiB)) $((48 * MiB / 20))
