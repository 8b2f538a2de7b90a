# Proves the guest came up with the interfaces later layers rely on.
echo "kernel $(uname -r)"
grep -q ' /sys/fs/cgroup ' /proc/mounts
grep -qw memory /sys/fs/cgroup/cgroup.subtree_control
# kstaled keeps its state in page_ext (tests/guest/kstaled-off.sh: not
# allocated with kstaled=off).
dmesg | grep "bytes of page_ext"
memload --size 8 --hot 2 --cgroup /sys/fs/cgroup/boot-check &
pid=$!
sleep 1
usage=$(cat /sys/fs/cgroup/boot-check/memory.current)
echo "boot-check cgroup memory.current=$usage"
[ "$usage" -ge $((8 << 20)) ]
kill $pid
wait $pid || true
