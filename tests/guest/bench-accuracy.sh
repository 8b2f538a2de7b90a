#!/bin/sh
# bench-accuracy (bench/section-2-accuracy.sh boots it): how close the
# idle memory kstaled and DAMON report for a cgroup comes to the truth.
# For anonymous and file memory, 10 %, 50 % and 90 % hot, two cgroups
# (a and b, of different sizes) run memload; kstaled (scan_seconds=1)
# reports "idle" after 3 scans, then, kstaled stopped, DAMON (paddr,
# default intervals) runs for kstaled_bench.damon_seconds (default 10)
# and its regions with no access for at least 1 s are attributed to
# cgroups through /proc/kpagecgroup.  memload's idle_bytes is the truth.
# Prints one line "BENCH {json}".
. /guest/lib-kstaled.sh
damon_seconds=$(cmdline_param kstaled_bench.damon_seconds 10)
mem_kib=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)
set -- $(pfn_span)
end_pfn=$2
for disk in 0 1; do
	mke2fs -q /dev/ram$disk >/dev/null
	mkdir -p /mnt/$disk
	mount -t ext4 /dev/ram$disk /mnt/$disk
done
damon_paddr_setup
# 10 aggregation intervals of 100 ms: idle for 1 s, as kstaled's "idle".
damon_idle_scheme 10

scenarios=
for kind in anon file; do
	for pct in 10 50 90; do
		echo "bench-accuracy: $kind memory, $pct % hot"
		case $kind in
		anon) size_a=128 size_b=64 ;;
		file) size_a=48 size_b=24 ;;
		esac
		pids=
		for cg in a b; do
			# a's file lives on /dev/ram0, b's on /dev/ram1.
			size=$size_a disk=0
			[ $cg = a ] || size=$size_b disk=1
			args="--size $size --hot $((size * pct / 100)) --kind $kind"
			[ $kind = anon ] || args="$args --file /mnt/$disk/data"
			memload_start /tmp/memload-$cg.log --cgroup /sys/fs/cgroup/bench-$cg $args
			pids="$pids $memload_pid"
		done

		echo 1 >/sys/kernel/mm/kstaled/scan_seconds
		kstaled_wait_scans /sys/fs/cgroup/bench-a 3
		echo 0 >/sys/kernel/mm/kstaled/scan_seconds

		echo on >$DAMON_ADMIN/state
		sleep "$damon_seconds"
		damon_idle_regions >/tmp/regions
		echo off >$DAMON_ADMIN/state
		pages_by_cgroup /tmp/regions "$end_pfn" >/tmp/damon-pages

		cgroups=
		for cg in a b; do
			dir=/sys/fs/cgroup/bench-$cg
			size=$(sed -n 's/.* size_bytes=\([0-9]*\) .*/\1/p' /tmp/memload-$cg.log)
			truth=$(sed -n 's/.* idle_bytes=\([0-9]*\) .*/\1/p' /tmp/memload-$cg.log)
			damon_pages=$(awk -v ino="$(stat -c %i $dir)" '$1 == ino { print $2 }' /tmp/damon-pages)
			cgroups="$cgroups${cgroups:+, }{\"name\": \"$cg\", \"size_bytes\": $size, \"true_idle_bytes\": $truth, \"kstaled_idle_bytes\": $(kstaled_idle $dir), \"damon_idle_bytes\": $((${damon_pages:-0} * 4096))}"
		done
		scenarios="$scenarios${scenarios:+, }{\"kind\": \"$kind\", \"hot_pct\": $pct, \"damon_regions\": $(wc -l </tmp/regions), \"cgroups\": [$cgroups]}"
		kill $pids
		wait $pids 2>/dev/null || true
	done
done
echo "BENCH {\"mem_kib\": $mem_kib, \"damon_seconds\": $damon_seconds, \"scenarios\": [$scenarios]}"
