#!/bin/sh
# kstaled-read: page cache that is only read with read(2) is referenced,
# not idle, with the multi-gen LRU on.  Such folios are mapped nowhere,
# so no accessed bit tells kstaled about the reads: folio_mark_accessed()
# must, and with MGLRU on it returns early, before any hook at its end.
# On ext4 over a RAM disk, one cgroup reads its 16 MiB file every 0.2 s
# while another leaves its own alone: after 3 scans the first has no
# idle memory and the second all 16 MiB, +- 5 %.
. /guest/lib-kstaled.sh
hot=/sys/fs/cgroup/kstaled-read-hot
cold=/sys/fs/cgroup/kstaled-read-cold
size=$((16 * MiB))
tolerance=$((size / 20))
# in_cgroup CGROUP CMD...: run CMD as a member of CGROUP, so that the page
# cache it brings in is charged there.
in_cgroup() {
	mkdir -p "$1"
	sh -c 'echo $$ >"$0/cgroup.procs" && shift && exec "$@"' "$1" "$@"
}
ramdisk_ext4
echo y >/sys/kernel/mm/lru_gen/enabled || fail "cannot turn the multi-gen LRU on"
echo "lru_gen/enabled: $(cat /sys/kernel/mm/lru_gen/enabled)"
in_cgroup $hot dd if=/dev/zero of=/mnt/hot bs=1M count=16 2>/dev/null
in_cgroup $cold dd if=/dev/zero of=/mnt/cold bs=1M count=16 2>/dev/null
sync
in_cgroup $hot sh -c 'while :; do dd if=/mnt/hot of=/dev/null bs=64k 2>/dev/null; sleep 0.2; done' &
trap 'echo 1 >$hot/cgroup.kill' EXIT
echo 1 >/sys/kernel/mm/kstaled/scan_seconds
kstaled_wait_scans $cold 3
for cg in $hot $cold; do
	echo "$cg:"
	grep '^idle_' $cg/memory.idle_page_stats | head -3
done
expect_near "file left alone, idle_clean" "$(kstaled_stat $cold idle_clean)" $size $tolerance
expect_below "file read every 0.2 s, idle" "$(kstaled_idle $hot)" $tolerance
