#!/bin/sh
# kstaled-hotplug: ages follow folios through migration, and memory going
# offline and coming back leaves the ages of the rest of memory alone.
# The guest boots with movablecore= so that its last memory blocks are
# ZONE_MOVABLE, where user memory goes first and which can go offline.  A
# 32 MiB region touched once sits in idle_5; the first ZONE_MOVABLE block
# goes offline, migrating the region's pages it held to other page frames
# (/proc/PID/pagemap tells how many), then comes back online.  Two scans
# after each step, the whole region is still in idle_5: the moved folios
# kept their ages and took no other page frame's, and nothing else was
# reset.  kstaled-compact tests migration by compaction in the same guest.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-hotplug
idle_region_start $cg 32

block=
for dir in /sys/devices/system/memory/memory*; do
	[ -z "$block" ] && grep -q Movable "$dir/valid_zones" && block=$dir
done
[ -n "$block" ] || fail "no ZONE_MOVABLE memory block: was the guest booted with movablecore=?"
echo "memory block: $block ($(cat "$block/valid_zones"))"
# 5 scans old 6 scans after the first.
expect_region_idle $cg 8 "before hotplug"

region_pfns /tmp/pfns.before
for state in offline online; do
	if ! echo $state >"$block/state"; then
		grep -i kernel /proc/iomem
		fail "cannot set $block $state"
	fi
	[ "$(cat "$block/state")" = $state ] || fail "$block is $(cat "$block/state"), not $state"
	if [ $state = offline ]; then
		expect_region_moved /tmp/pfns.before "offlining $block"
	fi
	expect_region_idle $cg 2 "after the block went $state"
done
