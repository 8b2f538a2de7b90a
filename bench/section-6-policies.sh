#!/bin/bash
# section-6-policies.sh OUTDIR: the balloon policies side by side.  Three
# Debian guests of 1 GiB under libvirt, their QEMU processes charged to one
# memory cgroup whose limit (KSTALED_BENCH_BUDGET_MIB, default 2560) is
# less than the sum of their maxima, each running redis-server with 256 MiB
# of values (half random, so zram compresses them about 2:1) read by
# redis-benchmark from a hot set whose size changes on a schedule:
#   a: 6554 keys (26 MiB), 39322 (154 MiB) at 150 s, 6554 again at 270 s
#   b: 6554 keys, 39322 at 210 s
#   c: 19661 keys (77 MiB) throughout
# Each policy (static, mom, proxmox, kstaled: the agent's policy= modes)
# boots the guests afresh from the same image, fills them the same way
# with no limit on the cgroup, then runs KSTALED_BENCH_POLICY_SECONDS
# (default 420) under the budget.
# The host is set up for ballooning as docs/balloon-policy.md says: its
# transparent huge pages are KSTALED_BENCH_HOST_THP (default never,
# restored at the end), as with THP on the balloons give the host little
# back; "host" keeps the host's setting, to measure that.
# bench/policies.py turns the runs into OUTDIR/section-6-policies.json;
# the runs' raw data stay in OUTDIR/section-6-policies/POLICY/.
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"
. "$KSTALED_TOP/bench/lib-bench-agent.sh"
. "$KSTALED_TOP/tests/lib-debian.sh"
[ $# -eq 1 ] || die "usage: section-6-policies.sh OUTDIR"
out=$1
work=$out/section-6-policies
run_seconds=${KSTALED_BENCH_POLICY_SECONDS:-420}
# Filled, each guest's QEMU holds about 740 MiB: the budget must hold the
# three, or the run stops before the policy starts.  Guests are not saved
# and restored between the policies: a QEMU being saved or restored under
# a budget grew to its whole guest (6.18 host) and the host killed it.
budget_mib=${KSTALED_BENCH_BUDGET_MIB:-2560}
thp=/sys/kernel/mm/transparent_hugepage
bench_thp=${KSTALED_BENCH_HOST_THP:-never}
# selected_thp: the value selected in transparent_hugepage/enabled.
selected_thp() {
	sed 's/.*\[\(.*\)\].*/\1/' $thp/enabled
}
host_thp=$(selected_thp)
policies=(static mom proxmox kstaled)
guests=(kstaled-bench-a kstaled-bench-b kstaled-bench-c)
# 4092 B values: with redis' string header they fill jemalloc's 4 KiB
# class, where 4096 B would take 5 KiB each.
mem_mib=1024 keys=65536 value_bytes=4092 sample_seconds=5
# guest seconds hot-keys: the working-set schedule (entries at 0 s first).
schedule="kstaled-bench-a 0 6554
kstaled-bench-b 0 6554
kstaled-bench-c 0 19661
kstaled-bench-a 150 39322
kstaled-bench-b 210 39322
kstaled-bench-a 270 6554"

# Scripts run in the guests.  fill: 256 MiB of redis values, each 2048 B
# of random base64 and a fixed pad, named as redis-benchmark -r picks
# keys (key:%012d).  load: redis-benchmark GETs over the hot set the host
# writes to /run/bench-hot.  sampler: redis' command count and the guest's
# paging counters every few seconds.
fill_script="pad=\$(printf '%$((value_bytes - 2048))s' '' | tr ' ' x)
head -c $((keys * 1536)) /dev/urandom | base64 -w 2048 |
	awk -v pad=\"\$pad\" '{ printf \"SET key:%012d %s%s\\r\\n\", NR - 1, \$0, pad }' |
	redis-cli --pipe >/dev/null
[ \"\$(redis-cli DBSIZE)\" -eq $keys ]"
# shellcheck disable=SC2016 # expanded in the guest
load_script='while :; do
	redis-benchmark -q -t get -r "$(cat /run/bench-hot)" -n 2000 -c 4 >/dev/null 2>&1
done'
# shellcheck disable=SC2016 # expanded in the guest
sampler_script='while :; do
	echo "$(date +%s) commands=$(redis-cli INFO stats |
		sed -n "s/^total_commands_processed:\([0-9]*\).*/\1/p")" \
		$(awk "/^(pswpin|workingset_refault_anon|workingset_refault_file|oom_kill) / {
			print \$1 \"=\" \$2 }" /proc/vmstat)
	sleep '$sample_seconds'
done >>/run/bench-samples'

# guest_script NAME FILE SCRIPT: SCRIPT written to FILE in guest NAME.
guest_script() {
	guest_sh "$1" "echo $(base64 -w0 <<<"$3") | base64 -d >$2" >/dev/null ||
		die "cannot write $2 in $1"
}

# wait_all MESSAGE: wait for every background job; die with MESSAGE if
# one failed.
wait_all() {
	local pid
	for pid in $(jobs -p); do
		wait "$pid" || die "$1"
	done
}

# The VMs' budget: a memory cgroup of its own holding libvirtd, so that
# every QEMU it starts is charged to it (libvirt makes no per-VM cgroups
# on this host).  cgroup v1 here; on v2 memory.max does the same, without
# the v1 counters (failcnt, oom_kill) the runs record.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	cgroup=/sys/fs/cgroup/kstaled-bench cgroup_root=/sys/fs/cgroup
	limit_file=memory.max usage_file=memory.current unlimited=max
else
	cgroup=/sys/fs/cgroup/memory/kstaled-bench cgroup_root=/sys/fs/cgroup/memory
	limit_file=memory.limit_in_bytes usage_file=memory.usage_in_bytes unlimited=-1
fi
# counter FILE [KEY]: the value of KEY's line in FILE, or FILE's one
# value; 0 where FILE does not exist (the v1 cgroup counters on v2).
counter() {
	if [ -f "$1" ]; then
		awk -v k="${2:-}" 'k == "" || $1 == k { print $NF }' "$1"
	else
		echo 0
	fi
}

libvirtd_pid=
cleanup() {
	local rc=$1 g
	agent_cleanup "$rc"
	for g in "${guests[@]}"; do
		debian_destroy "$g"
	done
	if [ -n "$libvirtd_pid" ]; then
		echo "$libvirtd_pid" >"$cgroup_root/cgroup.procs" 2>/dev/null || true
	fi
	libvirt_stop
	[ ! -d "$cgroup" ] || rmdir "$cgroup" 2>/dev/null || true
	echo "$host_thp" >$thp/enabled
}
trap 'cleanup $?' EXIT

[ "$bench_thp" = host ] || echo "$bench_thp" >$thp/enabled ||
	die "cannot set $thp/enabled to $bench_thp"
log "policies: host transparent huge pages: $(selected_thp)"
libvirt_start
libvirtd_pid=$(pgrep -xo libvirtd) || die "no libvirtd process"
mkdir -p "$cgroup"
echo "$libvirtd_pid" >"$cgroup/cgroup.procs"
rm -rf "$work"
mkdir -p "$work"
log "policies: running ${policies[*]}, $run_seconds s each"

for policy in "${policies[@]}"; do
	dir=$work/$policy
	mkdir -p "$dir"
	# The fill's peak is what each QEMU keeps: fill without a limit and
	# check that the budget holds what the guests were left with.
	echo $unlimited >"$cgroup/$limit_file"
	for g in "${guests[@]}"; do
		debian_boot "$g" $mem_mib >/dev/null &
	done
	wait_all "a guest did not boot"
	for g in "${guests[@]}"; do
		guest_script "$g" /root/bench-fill.sh "$fill_script"
		guest_script "$g" /root/bench-load.sh "$load_script"
		guest_script "$g" /root/bench-sampler.sh "$sampler_script"
		guest_sh "$g" 'sh /root/bench-fill.sh' 900 >/dev/null &
	done
	wait_all "filling redis failed"
	for g in "${guests[@]}"; do
		guest_sh "$g" 'sync; echo 3 >/proc/sys/vm/drop_caches' >/dev/null
	done
	# The overlays' page cache is charged to the cgroup too: each run
	# starts without it.
	sync
	echo 1 >/proc/sys/vm/drop_caches
	filled_mib=$(($(cat "$cgroup/$usage_file") >> 20))
	[ "$filled_mib" -lt "$budget_mib" ] ||
		die "the filled guests hold $filled_mib MiB, more than the $budget_mib MiB budget"
	echo $((budget_mib << 20)) >"$cgroup/$limit_file"
	log "policies: $policy: guests filled, $filled_mib MiB of $budget_mib"
	for g in "${guests[@]}"; do
		guest_sh "$g" "echo $(awk -v g="$g" '$1 == g && $2 == 0 { print $3 }' <<<"$schedule") >/run/bench-hot &&
			systemd-run --unit=bench-load sh /root/bench-load.sh &&
			systemd-run --unit=bench-sampler sh /root/bench-sampler.sh" >/dev/null 2>&1 ||
			die "cannot start the load in $g"
	done

	agent_conf=$dir/agent.conf agent_log=$dir/agent.log
	{
		printf '[agent]\nuri=%s\npoll-interval=10\nballoon-stats-period=5\n' "$LIBVIRT_URI"
		printf 'state-file=%s\nhost-memory=%s\n' "$dir/state.json" "$cgroup"
		printf '[policy]\nenabled=false\npolicy=%s\nmin-memory-mib=256\nswap-backed-reclaim-percent=100\n' "$policy"
		printf '[domain %s]\nenabled=true\n' "${guests[@]}"
	} >"$agent_conf"
	start=$(date +%s)
	failcnt0=$(counter "$cgroup/memory.failcnt")
	oom0=$(counter "$cgroup/memory.oom_control" oom_kill)
	pswpout0=$(counter /proc/vmstat pswpout)
	thp_faults0=$(counter /proc/vmstat thp_fault_alloc)
	agent_start
	log "policies: $policy running"

	# Host samples: each guest's balloon and the cgroup's usage; the
	# schedule's changes as they are made.
	printf 't\t%s\tcgroup-kib\n' "$(IFS=$'\t'; echo "${guests[*]}")" >"$dir/host.tsv"
	{
		printf 't\tguest\thot-keys\n'
		awk '$2 == 0 { printf "0\t%s\t%s\n", $1, $3 }' <<<"$schedule"
	} >"$dir/schedule.tsv"
	pending=$(awk -v end="$run_seconds" '$2 > 0 && $2 < end' <<<"$schedule")
	while now=$(($(date +%s) - start)) && [ "$now" -lt "$run_seconds" ]; do
		while [ -n "$pending" ] && read -r g at hot <<<"$pending" && [ "$at" -le "$now" ]; do
			guest_sh "$g" "echo $hot >/run/bench-hot" >/dev/null ||
				die "cannot change $g's hot set"
			printf '%s\t%s\t%s\n' "$(($(date +%s) - start))" "$g" "$hot" >>"$dir/schedule.tsv"
			pending=$(tail -n +2 <<<"$pending")
		done
		row=$now
		for g in "${guests[@]}"; do
			row+=$'\t'$(domain_kib "$g" actual 2>/dev/null || true)
		done
		printf '%s\t%s\n' "$row" "$(($(cat "$cgroup/$usage_file") >> 10))" >>"$dir/host.tsv"
		agent_alive || die "the agent exited during the $policy run; log:
$(tail -20 "$agent_log")"
		sleep $sample_seconds
	done
	agent_stop

	for g in "${guests[@]}"; do
		# A guest the host killed has no samples: the report says so.
		guest_sh "$g" 'cat /run/bench-samples' >"$dir/$g.samples" ||
			log "policies: $policy: no samples from $g"
		guest_oom_kills "$g" >"$dir/$g.oom" || true
		debian_destroy "$g"
	done
	jq -n --arg policy "$policy" --argjson start "$start" --argjson seconds "$run_seconds" \
		--argjson mem_kib $((mem_mib * 1024)) --argjson value_bytes $value_bytes \
		--argjson budget_kib $((budget_mib * 1024)) --argjson filled_kib $((filled_mib * 1024)) \
		--argjson cgroup_failcnt $(($(counter "$cgroup/memory.failcnt") - failcnt0)) \
		--argjson cgroup_oom_kills $(($(counter "$cgroup/memory.oom_control" oom_kill) - oom0)) \
		--argjson host_swap_out $(($(counter /proc/vmstat pswpout) - pswpout0)) \
		--argjson host_thp_faults $(($(counter /proc/vmstat thp_fault_alloc) - thp_faults0)) \
		--arg host_thp "$(selected_thp)" \
		'{policy: $policy, start: $start, seconds: $seconds, "mem-kib": $mem_kib,
		  "value-bytes": $value_bytes, "budget-kib": $budget_kib,
		  "filled-kib": $filled_kib,
		  "cgroup-failcnt": $cgroup_failcnt, "cgroup-oom-kills": $cgroup_oom_kills,
		  "host-swap-out-pages": $host_swap_out, "host-thp": $host_thp,
		  "host-thp-faults": $host_thp_faults}' \
		>"$dir/run.json"
	rm -f "$dir/state.json"
done
/usr/bin/python3 "$KSTALED_TOP/bench/policies.py" "$work" "${policies[@]}" \
	>"$out/section-6-policies.json"
