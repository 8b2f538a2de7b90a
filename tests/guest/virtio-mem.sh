#!/bin/sh
# virtio-mem (run by tests/test-virtio-mem.sh, which resizes the guest's
# virtio-mem device over QMP when asked on the console): memory plugged
# and unplugged by virtio-mem leaves the ages of the memory already there
# alone.  A 32 MiB region touched once sits in idle_5; the host plugs
# 256 MiB, which the kernel onlines (memhp_default_state=online_movable),
# then unplugs it.  Two scans after each resize the whole region is still
# in idle_5.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/virtio-mem
idle_region_start $cg 32
# 5 scans old 6 scans after the first.
expect_region_idle $cg 8 "before virtio-mem resizes"

mem_total() {
	awk '$1 == "MemTotal:" { print $2 * 1024 }' /proc/meminfo
}
for step in plug unplug; do
	before=$(mem_total)
	echo "VIRTIO-MEM-$step"
	tries=0
	while :; do
		change=$(($(mem_total) - before))
		[ $step = plug ] || change=$((-change))
		[ $change -lt $((256 * MiB)) ] || break
		tries=$((tries + 1))
		[ $tries -lt 1200 ] || fail "MemTotal changed by $change bytes 120 s after asking to $step 256 MiB"
		sleep 0.1
	done
	echo "virtio-mem $step: MemTotal $before -> $(mem_total)"
	expect_region_idle $cg 2 "after the $step"
done
