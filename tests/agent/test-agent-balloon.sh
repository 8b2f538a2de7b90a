#!/bin/bash
# Two guests under libvirt with the kstaled device.  One's workload leaves
# most of its memory idle: the agent balloons it down near its working set
# without making it run out of memory.  The other's idle memory wakes up:
# the agent shrinks it too, and when its workload touches that memory
# again, gives it all back within 2 s of the guest's early report.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"

idle=kstaled-agent-idle
wake=kstaled-agent-wake
trap 'agent_cleanup $?; domain_destroy $idle; domain_destroy $wake; libvirt_stop' EXIT
libvirt_start
# The device scans every second and memory idle for 5 s is cold, so that
# the guests shrink within the test's minutes; a stale drop of 5 % of the
# guest (about the old 16 MiB threshold) counts as an emergency.
agent_config --domains "$idle $wake" scan-seconds=1 cold-age=5 min-cold-age=5 \
	headroom-percent=10 headroom-mib=32 \
	min-memory-mib=128 hysteresis-mib=16 hysteresis-percent=0 max-step-mib=128 \
	stale-drop-mib=16 emergency-stale-drop-percent=5 pressure-holdoff=60 \
	swap-backed-reclaim-percent=100
# [domain $wake] comes last: a floor of 256 MiB leaves its page cache
# resident (and stale) while it is shrunk.
echo "min-memory-mib=256" >>"$agent_conf"

idle_console=$(domain_start "$idle" 512 "kstaled_vm.run=agent-idle")
wake_console=$(domain_start "$wake" 512 "kstaled_vm.run=agent-wake kstaled_vm.idle_seconds=60")
for console in "$idle_console" "$wake_console"; do
	wait_for_file_line "$console" '^memload: ready' 120 ||
		die "workload did not start; console:
$(cat "$console")"
done
full=$((512 * 1024))

# --dry-run decides and logs, and changes nothing.
agent_start --dry-run
agent_wait_log 1 "dry-run: domain=$idle action=inflate reason=shrink" 60
agent_stop
[ "$(domain_kib "$idle" actual)" -eq "$full" ] ||
	die "--dry-run changed $idle's balloon to $(domain_kib "$idle" actual) KiB"
jq -e '."dry-run" == true' "$agent_state" >/dev/null || die "the state file does not say dry-run"
echo "dry run: $(grep -c "dry-run: domain=" "$agent_log") decisions logged, balloons untouched"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
agent_start --metrics-port "$port"
start=$SECONDS

# Both shrink: the idle guest's 260 idle MiB and the waking guest's 44 go;
# down to the floor or the working set plus headroom means under 320 MiB.
for dom in "$idle" "$wake"; do
	wait_balloon "$dom" -le $((320 * 1024)) 120
	echo "$dom ballooned to $(domain_kib "$dom" actual) KiB after $((SECONDS - start)) s"
done
grep -q '^agent-wake: touching all' "$wake_console" &&
	die "$wake's workload woke up before the agent shrank it"
# Settled (the agent finds it within the hysteresis of its target), the
# idle guest sits between its floor and its target plus hysteresis.
deadline=$((SECONDS + 90))
until jq -e --arg d "$idle" '.domains[] | select(.name == $d) | .decision.reason == "hysteresis"' \
	"$agent_state" >/dev/null; do
	[ $SECONDS -lt $deadline ] || die "$idle did not settle in 90 s; agent log:
$(tail -20 "$agent_log")"
	sleep 1
done
"$ctl_bin" --state-file "$agent_state"
actual=$(domain_kib "$idle" actual)
decision=$(jq -c --arg d "$idle" '.domains[] | select(.name == $d) | .decision' "$agent_state")
floor=$(echo "$decision" | jq '.["floor-kib"]')
target=$(echo "$decision" | jq '.["target-kib"]')
echo "$idle settled at $actual KiB: target $target, working set $(echo "$decision" | jq '.["working-set-kib"]'), floor $floor KiB"
# Never below the configured minimum.  The decision's floor can be higher,
# and move: after pressure the policy raises a soft floor above the
# balloon and deflates to it next.  The guest's balloon driver inflates by
# whole page arrays, so it may overshoot a request by less than 1 MiB.
[ "$actual" -ge $((128 * 1024 - 1024)) ] || die "$idle at $actual KiB, below min-memory-mib=128"
[ "$actual" -le $((target + 17 * 1024)) ] ||
	die "$idle at $actual KiB, further than the hysteresis above its target $target KiB"
guest_healthy "$idle" "$idle_console"

# The metrics agree with the state file, per domain and per cgroup.
# The target moves with every poll (one a second), and the state file
# follows within a second: a scrape must agree with the state file within
# a few tries.
state_target() {
	jq --arg d "$idle" '.domains[] | select(.name == $d) | .decision["target-kib"]' "$agent_state"
}
for attempt in $(seq 10); do
	metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || die "no metrics on port $port"
	target=$(state_target)
	! echo "$metrics" | grep -qx "kstaled_domain_target_bytes{domain=\"$idle\"} $((target * 1024))" || break
	[ "$attempt" -lt 10 ] ||
		die "metrics disagree with the state file's target $target KiB: $(echo "$metrics" | grep "domain=\"$idle\"" | head -20)"
	sleep 0.3
done
echo "$metrics" | grep -qE "^kstaled_cgroup_idle_bytes\{domain=\"$idle\",cgroup=\"/work\",kind=\"dirty-swap\",min_scans=\"1\"\} [1-9][0-9]*$" ||
	die "metrics lack $idle's /work idle memory: $(echo "$metrics" | grep cgroup_idle | head)"
echo "$metrics" | grep -qE "^kstaled_domain_report_idle_bytes\{domain=\"$idle\",kind=\"dirty-swap\",min_scans=\"1\"\} [1-9][0-9]*$" ||
	die "metrics lack $idle's idle memory summed over its cgroups: $(echo "$metrics" | grep report_idle | head)"
echo "$metrics" | grep -x "kstaled_domain_managed{domain=\"$wake\"} 1" >/dev/null ||
	die "metrics do not show $wake as managed"

# The waking guest's idle memory becomes hot: it reports early, and the
# agent deflates it.
wait_for_file_line "$wake_console" '^agent-wake: touching all' 120 ||
	die "the waking workload never touched its memory"
agent_wait_log 1 "domain=$wake KSTALED_EARLY_REPORT" 30
# The decision is logged after the event, maybe a poll later: wait for it,
# then take the first one after the event (awk: grep -m1 in a pipe would
# close it early and fail the pipeline under pipefail).
agent_wait_log 1 "domain=$wake action=.* reason=early-report" 30
event=$(grep -m1 "domain=$wake KSTALED_EARLY_REPORT" "$agent_log")
decision=$(awk -v event="$event" -v pat="domain=$wake action=.* reason=early-report" \
	'$0 == event { seen = 1; next } seen && $0 ~ pat { print; exit }' "$agent_log")
[ -n "$decision" ] || die "no early-report decision for $wake after its event; log:
$(tail -30 "$agent_log")"
echo "$event"
echo "$decision"
echo "$decision" | grep -q "new-kib=$full " ||
	die "the early report did not bring $wake back to $full KiB"
delay=$(echo "$event" | sed -nE 's/.* delay-ms=([0-9]+).*/\1/p')
latency=$(($(log_ms "$decision") - $(log_ms "$event") + delay))
echo "early report to balloon request: $latency ms"
[ "$latency" -le 2000 ] || die "the agent took $latency ms to react to the early report"
deflated=$SECONDS
wait_balloon "$wake" -eq "$full" 30
echo "$wake back at $full KiB within $((SECONDS - deflated)) s of the agent's request"
guest_healthy "$wake" "$wake_console"
guest_healthy "$idle" "$idle_console"
agent_alive || die "the agent exited"
