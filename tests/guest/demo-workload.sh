# The demo guest's workload (scripts/demo.sh): memory that goes idle, wakes
# up at once, and goes idle again.  200 MiB of anonymous memory (its idle
# part can go to a zram swap device) and a 48 MiB file on ext4 over a RAM
# disk (idle page cache is what kstaled counts as stale), each with a few
# MiB hot.  After kstaled_vm.idle_seconds (default 100) both are touched
# whole once, and then left to go idle again.  Never exits by itself.
. /guest/lib-kstaled.sh
idle_seconds=$(cmdline_param kstaled_vm.idle_seconds 100)
zram_swap 300M
ramdisk_ext4
mkdir -p /sys/fs/cgroup/demo
memload --cgroup /sys/fs/cgroup/demo --size 200 --hot 20 --dirty &
anon=$!
memload --cgroup /sys/fs/cgroup/demo --size 48 --hot 4 --kind file --file /mnt/demo &
file=$!
echo "demo-workload: 248 MiB allocated, 24 MiB hot"
sleep "$idle_seconds"
echo "demo-workload: touching all 248 MiB"
kill -USR1 $anon $file
echo "demo-workload: 24 MiB hot again"
wait
