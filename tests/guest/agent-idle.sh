# Guest workload of the agent tests: most of its memory allocated but idle,
# until it all becomes hot again.  memload dirties 300 MiB (anonymous, so
# idle pages can only go to swap: a zram swap device takes them) and keeps
# 40 MiB hot; after kstaled_vm.idle_seconds (default 90) it touches all
# 300 MiB once and keeps running.  Never exits by itself.
idle_seconds=90
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	kstaled_vm.idle_seconds=*) idle_seconds=${arg#kstaled_vm.idle_seconds=} ;;
	esac
done
echo 400M >/sys/block/zram0/disksize
mkswap /dev/zram0 >/dev/null
swapon /dev/zram0
mkdir -p /sys/fs/cgroup/work
memload --cgroup /sys/fs/cgroup/work --size 300 --hot 40 --dirty &
pid=$!
sleep "$idle_seconds"
echo "agent-idle: touching all memory"
kill -USR1 $pid
wait $pid
