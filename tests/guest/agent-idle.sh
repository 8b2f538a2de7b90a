# Guest workload of the agent tests: most of its memory allocated but idle.
# memload dirties 300 MiB and keeps 40 MiB of it hot; the idle part is
# anonymous, so only swap can take it: a zram swap device does.  Never
# exits by itself.
echo 400M >/sys/block/zram0/disksize
mkswap /dev/zram0 >/dev/null
swapon /dev/zram0
mkdir -p /sys/fs/cgroup/work
memload --cgroup /sys/fs/cgroup/work --size 300 --hot 40 --dirty
