#!/bin/bash
# section-3-reaction-time.sh OUTDIR: how fast the host learns that a
# guest's idle memory is in use again.  A 512 MiB guest
# (tests/guest/bench-agent.sh with agent-wake.sh) keeps 44 of its 48 MiB
# of page cache idle, and so stale, while the agent balloons it down, then
# touches all of it; from that jump (its
# console line, seen by the host) to the KSTALED_EARLY_REPORT event, to
# the agent's deflate request, to the balloon back at full size; beside
# it the histogram-only path: the first query-kstaled report whose
# histograms no longer show the memory idle.  Writes
# OUTDIR/section-3-reaction-time.json.
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"
. "$KSTALED_TOP/bench/lib-bench-agent.sh"
[ $# -eq 1 ] || die "usage: section-3-reaction-time.sh OUTDIR"
out=$1
idle_seconds=90 mem_kib=$((512 * 1024))

domain=kstaled-bench-reaction
events=$agent_dir/events
trap 'rc=$?; kill $(jobs -p) 2>/dev/null || true; agent_cleanup $rc; domain_destroy $domain; libvirt_stop' EXIT
libvirt_start
# The settings of the agent test with this workload (the wake domain of
# tests/agent/test-agent-balloon.sh): the device scans every second and
# memory idle for 5 scans is cold, so that the guest is shrunk before the
# jump (by default 120 scans make memory cold, and nothing shrinks before
# then); a floor of 256 MiB keeps the page cache resident, and stale,
# while the guest is shrunk.
agent_config --domains "$domain" scan-seconds=1 cold-age=5 min-cold-age=5 \
	headroom-percent=10 headroom-mib=32 \
	min-memory-mib=256 hysteresis-mib=16 hysteresis-percent=0 max-step-mib=128 \
	stale-drop-mib=16 emergency-stale-drop-percent=5 pressure-holdoff=60
console=$(domain_start "$domain" 512 \
	"kstaled_vm.run=bench-agent kstaled_vm.workload=wake kstaled_vm.idle_seconds=$idle_seconds")
wait_for_file_line "$console" '^memload: ready' 120 ||
	die "workload did not start; console:
$(cat "$console")"
virsh_ qemu-monitor-event "$domain" --event KSTALED_EARLY_REPORT --loop --timestamp \
	>"$events" &
agent_start

# idle_bytes: the workload cgroup's memory idle for at least one scan,
# and the guest scan it comes from, as "SCANS BYTES".
idle_bytes() {
	virsh_ qemu-monitor-command "$domain" '{"execute":"query-kstaled"}' |
		jq -r '.return as $r | $r.cgroups[] | select(.path == "/work") |
			"\($r["guest-scans"]) \(.["idle-clean"][0] + .["idle-dirty-file"][0] + .["idle-dirty-swap"][0])"'
}

log "reaction: waiting for the workload's jump (after $idle_seconds s idle)"
until grep -q '^agent-wake: touching all' "$console"; do sleep 0.02; done
jump_ms=$(now_ms)
read -r jump_scans idle_before < <(idle_bytes)
histogram_ms= full_ms=
deadline=$((SECONDS + 60))
while [ -z "$histogram_ms" ] || [ -z "$full_ms" ]; do
	[ $SECONDS -lt $deadline ] || break
	if [ -z "$histogram_ms" ]; then
		read -r scans idle < <(idle_bytes)
		[ "$scans" -gt "$jump_scans" ] && [ "$idle" -lt $((idle_before / 2)) ] &&
			histogram_ms=$(now_ms)
	fi
	[ -n "$full_ms" ] || [ "$(domain_kib "$domain" actual)" -lt $mem_kib ] ||
		full_ms=$(now_ms)
	sleep 0.1
done
event=$(grep -m1 'KSTALED_EARLY_REPORT' "$events" || true)
event_ms=
[ -z "$event" ] || event_ms=$(log_ms "x: $(sed -nE 's/^[0-9-]+ ([0-9:.]+)[+].*/\1/p' <<<"$event"): ")
decision=$(grep -m1 -E "domain=$domain action=deflate" "$agent_log" || true)
decision_ms=
[ -z "$decision" ] || decision_ms=$(log_ms "$decision")
reason=$(sed -nE 's/.* reason=([a-z-]+).*/\1/p' <<<"$decision")

since() { [ -n "$1" ] && echo $(($1 - jump_ms)) || echo null; }
jq -n --argjson event "$(since "$event_ms")" --argjson decision "$(since "$decision_ms")" \
	--argjson full "$(since "$full_ms")" --argjson histogram "$(since "$histogram_ms")" \
	--arg reason "$reason" --argjson before "$idle_before" '{
	section: 3, name: "reaction-time", title: "Reaction time after idle memory is touched again (ms from the jump)",
	columns: ["path", "signal", "ms after the jump"],
	rows: [["early report", "KSTALED_EARLY_REPORT event", $event],
	       ["early report", "agent deflate request (reason \($reason))", $decision],
	       ["early report", "balloon back at full size", $full],
	       ["histogram only", "first report showing the memory hot", $histogram]],
	notes: ["jump: the host seeing the guest console line written just before memload touches its memory (polled every 20 ms)",
		"histogram only: query-kstaled polled every 100 ms until its /work cgroup shows less than half of the \($before / 1048576 | floor) MiB idle before the jump; an agent polling every poll-interval seconds adds up to that interval",
		"null: not seen within 60 s"],
	plot: {x: "signal", y: ["ms after the jump"], ylabel: "ms"}
}' >"$out/section-3-reaction-time.json"
