# Guest workload of the agent tests: idle memory that wakes up.  kstaled
# counts only idle clean pages as stale, so the workload is page cache: a
# 48 MiB file on ext4 over a RAM disk, 4 MiB of it hot.  After
# kstaled_vm.idle_seconds (default 60) it touches the whole file once, so
# the guest's stale count drops by 44 MiB within a scan, and keeps running.
. /guest/lib-kstaled.sh
idle_seconds=$(cmdline_param kstaled_vm.idle_seconds 60)
ramdisk_ext4
mkdir -p /sys/fs/cgroup/work
memload --cgroup /sys/fs/cgroup/work --size 48 --hot 4 --kind file --file /mnt/wake &
pid=$!
sleep "$idle_seconds"
echo "agent-wake: touching all memory"
kill -USR1 $pid
wait $pid
