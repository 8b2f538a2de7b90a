#!/bin/sh
# bench-hooks-off (bench/section-7-hooks-off.sh boots it): what kstaled's
# hooks cost the paths they sit in, anonymous page faults and page cache
# reads (tests/guest/hookbench.c), with kstaled as the kernel command line
# asks: kstaled_bench.state=never (scanning never turned on: the static
# key keeps the hooks off) or stopped (two scans, then scanning turned
# off: the hooks stay on and find flags to clear).  The kernel built
# without kstaled boots with state=never too.  Prints one line
# "BENCH {json}".  Kernel command line: kstaled_bench.mib=N (default 64),
# kstaled_bench.rounds=N (default 30).
. /guest/lib-kstaled.sh
state=$(cmdline_param kstaled_bench.state never)
mib=$(cmdline_param kstaled_bench.mib 64)
rounds=$(cmdline_param kstaled_bench.rounds 30)
case "$state" in
never) ;;
stopped)
	[ -d /sys/kernel/mm/kstaled ] || fail "state=stopped needs a kernel with kstaled"
	cg=/sys/fs/cgroup/bench-hooks-off
	memload_start /tmp/memload.log --cgroup $cg --size 16 --hot 0
	echo 1 >/sys/kernel/mm/kstaled/scan_seconds
	kstaled_wait_scans $cg 2
	echo 0 >/sys/kernel/mm/kstaled/scan_seconds
	;;
*) fail "kstaled_bench.state must be never or stopped, got '$state'" ;;
esac
json=$(hookbench "$mib" "$rounds" | sed -n 's/^hookbench //p')
[ -n "$json" ] || fail "hookbench printed no result"
kstaled=$([ -d /sys/kernel/mm/kstaled ] && echo true || echo false)
echo "BENCH {\"kernel_has_kstaled\": $kstaled, \"state\": \"$state\", \"result\": $json}"
