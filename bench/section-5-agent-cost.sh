#!/bin/bash
# section-5-agent-cost.sh OUTDIR: the host agent's CPU time per domain per
# poll, and its memory, with 1, 2 and 4 (by default) idle 256 MiB guests that have the
# device, polled every second.  Writes OUTDIR/section-5-agent-cost.json.
# Environment: KSTALED_BENCH_AGENT_SECONDS (measured time per guest count,
# default 60), KSTALED_BENCH_AGENT_GUESTS (guest counts, default "1 2 4").
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"
. "$KSTALED_TOP/bench/lib-bench-agent.sh"
[ $# -eq 1 ] || die "usage: section-5-agent-cost.sh OUTDIR"
out=$1
seconds=${KSTALED_BENCH_AGENT_SECONDS:-60}
ticks_per_second=$(getconf CLK_TCK)

domains=()
trap 'agent_cleanup $?; for d in "${domains[@]}"; do domain_destroy "$d"; done; libvirt_stop' EXIT
libvirt_start
agent_config --domains "$(printf 'kstaled-bench-cost-%s ' 1 2 3 4)"

# cpu_ticks_and_polls: the agent's user+system CPU ticks and the polls
# of every domain so far, as "TICKS POLLS".
cpu_ticks_and_polls() {
	local ticks polls
	# Fields 14 and 15 of /proc/PID/stat, counted after the ")" of comm.
	ticks=$(sed 's/.*) //' "/proc/$agent_pid/stat" | awk '{ print $12 + $13 }')
	polls=$(jq '[.domains[].counters.polls] | add // 0' "$agent_state")
	echo "$ticks $polls"
}

runs=()
for count in ${KSTALED_BENCH_AGENT_GUESTS:-1 2 4}; do
	while [ ${#domains[@]} -lt $count ]; do
		name=kstaled-bench-cost-$((${#domains[@]} + 1))
		console=$(domain_start "$name" 256 "")
		wait_for_file_line "$console" '^KSTALED-VM-READY' 120 ||
			die "$name did not boot; console:
$(cat "$console")"
		domains+=("$name")
	done
	log "agent cost: $count guest(s), $seconds s"
	agent_start
	# Every domain polled at least twice before measuring.
	until [ -f "$agent_state" ] &&
		jq -e --argjson n "$count" '[.domains[] | select(.counters.polls >= 2)] | length == $n' \
			"$agent_state" >/dev/null 2>&1; do
		agent_alive || die "the agent exited; log:
$(cat "$agent_log")"
		sleep 0.5
	done
	read -r ticks0 polls0 < <(cpu_ticks_and_polls)
	sleep "$seconds"
	read -r ticks1 polls1 < <(cpu_ticks_and_polls)
	rss_kib=$(awk '/^VmRSS:/ { print $2 }' "/proc/$agent_pid/status")
	agent_stop
	rm -f "$agent_state"
	runs+=("{\"guests\": $count, \"ticks\": $((ticks1 - ticks0)), \"polls\": $((polls1 - polls0)), \"rss_kib\": $rss_kib}")
done

printf '%s\n' "${runs[@]}" | jq -s --argjson hz "$ticks_per_second" --argjson seconds "$seconds" '
	def r(x): (x * 100 | round) / 100;
	{
	section: 5, name: "agent-cost", title: "Agent cost (poll every second)",
	columns: ["guests", "polls", "CPU ms", "CPU ms per domain per poll", "CPU %", "RSS MiB"],
	rows: [ .[] | (.ticks * 1000 / $hz) as $ms |
		[.guests, .polls, $ms, r($ms / .polls), r($ms / 10 / $seconds), r(.rss_kib / 1024)] ],
	notes: ["\($seconds) s per guest count; CPU from /proc/PID/stat at \(1000 / $hz) ms resolution; the agent queries each domain (query-kstaled and its balloon statistics) once per poll"],
	plot: {x: "guests", y: ["CPU ms per domain per poll"], ylabel: "ms"},
	raw: .
}' >"$out/section-5-agent-cost.json"
