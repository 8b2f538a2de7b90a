# Guest workload of the agent benchmarks (bench/section-3 and -4): one of
# the agent tests' workloads, tests/guest/agent-WORKLOAD.sh with WORKLOAD
# from kstaled_vm.workload (idle or wake), plus the figures the benchmarks
# need from inside the guest: what it had available before the workload,
# and every second its swap-ins, major faults and OOM kills so far.
. /guest/lib-kstaled.sh
workload=$(cmdline_param kstaled_vm.workload idle)
awk '/^MemAvailable:/ { print "bench-agent: available-kib=" $2 }' /proc/meminfo
while sleep 1; do
	awk '$1 == "pswpin" || $1 == "pgmajfault" || $1 == "oom_kill" {
		line = line " " $1 "=" $2 } END { print "bench-agent: vmstat" line }' /proc/vmstat
done &
. "/guest/agent-$workload.sh"
