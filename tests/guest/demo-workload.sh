# The demo guest's workload: a working set that changes over time, so the
# host sees the guest's memory use move.  Phases are printed on the console;
# when they are done the guest powers itself off.
phase() {
	echo "demo-workload: phase $1: $2 MiB allocated, $3 MiB hot for $4 s"
	memload --cgroup /sys/fs/cgroup/demo --size "$2" --hot "$3" &
	pid=$!
	sleep "$4"
	kill $pid
	wait $pid || true
}
phase 1 200 40 30
phase 2 200 200 30
