# Guest workload of the agent tests: most of its memory allocated but idle.
# memload dirties 300 MiB and keeps 40 MiB of it hot; the idle part is
# anonymous, so only swap can take it: a zram swap device does.  Never
# exits by itself.
. /guest/lib-kstaled.sh
zram_swap 400M
mkdir -p /sys/fs/cgroup/work
memload --cgroup /sys/fs/cgroup/work --size 300 --hot 40 --dirty
