#!/bin/sh
# kstaled-restart: a scan that starts over forgets what it had counted,
# so the published idle memory never exceeds the cgroup's usage.  A
# cgroup holds 128 MiB of idle memory; with 4 s scans, scanning is
# stopped (scan_seconds 0) for 1.5 s after 1, 2 and 3 of a scan's four
# slices, and each following scan must publish no more idle memory than
# memory.current.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-restart
knob=/sys/kernel/mm/kstaled/scan_seconds
echo 4 >$knob
memload_start /tmp/memload.log --cgroup $cg --size 128 --hot 0
kstaled_wait_scans $cg 2
for slices in 1 2 3; do
	kstaled_wait_scans $cg 1
	# A scan's first slice runs 1 s after the previous scan's last.
	sleep $slices.5
	echo 0 >$knob
	sleep 1.5
	echo 4 >$knob
	kstaled_wait_scans $cg 1
	cat $cg/memory.idle_page_stats
	expect_below "idle after a restart $slices slices into a scan" \
		"$(kstaled_idle $cg)" $(($(cat $cg/memory.current) + 1))
done
