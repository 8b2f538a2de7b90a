#!/bin/bash
# section-4-agent-savings.sh OUTDIR: the memory the agent takes from a
# 512 MiB guest whose working set is known (tests/guest/bench-agent.sh with
# agent-idle.sh: 300 MiB dirtied, 40 MiB of it hot), as % of the truly idle memory, with
# the guest's swap-ins, major faults and OOM kills over the run.  Truly
# idle is what the guest had available before the workload minus the hot
# 40 MiB.  Writes OUTDIR/section-4-agent-savings.json.
# Environment: KSTALED_BENCH_SETTLE_SECONDS (time given to the agent,
# default 150).
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"
. "$KSTALED_TOP/bench/lib-bench-agent.sh"
[ $# -eq 1 ] || die "usage: section-4-agent-savings.sh OUTDIR"
out=$1
settle=${KSTALED_BENCH_SETTLE_SECONDS:-150}
mem_mib=512 hot_mib=40

domain=kstaled-bench-savings
trap 'agent_cleanup $?; domain_destroy $domain; libvirt_stop' EXIT
libvirt_start
# The agent integration tests' settings (tests/agent/test-agent-balloon.sh):
# the device scans every second and memory idle for 5 scans is cold, so
# that the guest shrinks within the run (by default 120 scans make memory
# cold, and nothing shrinks before then); a floor of 128 MiB; swap-backed
# memory reclaimable, since the workload is anonymous, with zram swap.
agent_config --domains "$domain" scan-seconds=1 cold-age=5 min-cold-age=5 \
	headroom-percent=10 headroom-mib=32 \
	min-memory-mib=128 hysteresis-mib=16 hysteresis-percent=0 max-step-mib=128 \
	pressure-holdoff=60 swap-backed-reclaim-percent=100
console=$(domain_start "$domain" $mem_mib \
	"kstaled_vm.run=bench-agent kstaled_vm.workload=idle")
wait_for_file_line "$console" '^memload: ready' 120 ||
	die "workload did not start; console:
$(cat "$console")"
available_kib=$(console_value "$console" available-kib)
vmstat_start=$(grep '^bench-agent: vmstat' "$console" | tail -n 1)
log "savings: agent running for $settle s"
agent_start
sleep "$settle"
agent_alive || die "the agent exited; log:
$(cat "$agent_log")"
actual_kib=$(domain_kib "$domain" actual)
vmstat_end=$(grep '^bench-agent: vmstat' "$console" | tail -n 1)
"$ctl_bin" --state-file "$agent_state" >&2

field() { sed -nE "s/.* $2=([0-9]+).*/\\1/p" <<<"$1"; }
jq -n --argjson mem_kib $((mem_mib * 1024)) --argjson hot_kib $((hot_mib * 1024)) \
	--argjson available_kib "$available_kib" --argjson actual_kib "$actual_kib" \
	--argjson settle "$settle" \
	--argjson swap_in $(($(field "$vmstat_end" pswpin) - $(field "$vmstat_start" pswpin))) \
	--argjson major $(($(field "$vmstat_end" pgmajfault) - $(field "$vmstat_start" pgmajfault))) \
	--argjson oom $(($(field "$vmstat_end" oom_kill) - $(field "$vmstat_start" oom_kill))) \
	--slurpfile state "$agent_state" '
	def r(x): (x * 100 | round) / 100;
	($available_kib - $hot_kib) as $idle_kib | ($mem_kib - $actual_kib) as $taken_kib | {
	section: 4, name: "agent-savings", title: "Agent memory savings (512 MiB guest, 40 MiB hot)",
	columns: ["guest MiB", "truly idle MiB", "reclaimed MiB", "reclaimed % of idle",
		  "balloon MiB", "swap-ins (pages)", "major faults", "OOM kills"],
	rows: [[$mem_kib / 1024, r($idle_kib / 1024), r($taken_kib / 1024),
		r($taken_kib * 100 / $idle_kib), r($actual_kib / 1024), $swap_in, $major,
		$oom]],
	notes: ["truly idle: MemAvailable before the workload minus its 40 MiB hot set; reclaimed: the guest maximum minus the balloon after \($settle) s of the agent (kstaled policy polled every second, cold after 5 scans of 1 s, floor 128 MiB, swap-backed memory reclaimable, as in tests/agent/test-agent-balloon.sh)",
		"swap-ins, major faults and OOM kills are the guest'"'"'s /proc/vmstat deltas over the run"],
	plot: {x: "guest MiB", y: ["truly idle MiB", "reclaimed MiB"], ylabel: "MiB"},
	raw: {available_kib: $available_kib, actual_kib: $actual_kib, agent_state: $state[0]}
}' >"$out/section-4-agent-savings.json"
