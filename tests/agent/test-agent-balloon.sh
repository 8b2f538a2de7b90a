#!/bin/bash
# Two guests under libvirt with the kstaled device: one whose workload
# leaves most of its memory idle, one whose memory is all hot.  The agent
# balloons the idle one down near its working set without making it run
# out of memory, and leaves the busy one its working set.  When the idle
# guest's workload touches all its memory again, the agent gives the memory
# back within 2 s of the guest's early report.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"
agent_require_device

idle=kstaled-agent-idle
busy=kstaled-agent-busy
trap 'agent_cleanup; domain_destroy $idle; domain_destroy $busy; libvirt_stop' EXIT
libvirt_start
agent_config idle-age=5 headroom-percent=10 headroom-mib=32 min-memory-mib=128 \
	hysteresis-mib=16 hysteresis-percent=0 max-step-mib=128 stale-drop-mib=32 \
	pressure-holdoff=60 reclaim-swap-backed=true

idle_console=$(domain_start "$idle" 512 "kstaled_vm.run=agent-idle kstaled_vm.idle_seconds=150")
busy_console=$(domain_start "$busy" 512 "kstaled_vm.run=agent-busy")
for console in "$idle_console" "$busy_console"; do
	wait_for_file_line "$console" '^memload: ready' 120 ||
		die "workload did not start; console:
$(cat "$console")"
done
full=$((512 * 1024))
agent_start
start=$SECONDS

# The idle guest: 260 of its 300 MiB workload idle.  Down to its working
# set plus headroom means under 320 MiB (from 512).
deadline=$((SECONDS + 120))
until [ "$(domain_kib "$idle" actual)" -le $((320 * 1024)) ]; do
	[ $SECONDS -lt $deadline ] ||
		die "$idle still at $(domain_kib "$idle" actual) KiB after 120 s; agent log:
$(cat "$agent_log")"
	grep -q '^agent-idle: touching all' "$idle_console" &&
		die "$idle's workload woke up before the agent shrank it"
	sleep 1
done
echo "$idle ballooned to $(domain_kib "$idle" actual) KiB after $((SECONDS - start)) s"
# Let it settle, then compare with the agent's own estimate.
sleep 10
"$ctl_bin" --state-file "$agent_state"
jq -e --arg d "$idle" '.domains[] | select(.name == $d) | .decision.reason' "$agent_state"
actual=$(domain_kib "$idle" actual)
floor=$(jq --arg d "$idle" '.domains[] | select(.name == $d) | .decision["floor-kib"]' "$agent_state")
target=$(jq --arg d "$idle" '.domains[] | select(.name == $d) | .decision["target-kib"]' "$agent_state")
[ "$actual" -ge "$floor" ] || die "$idle at $actual KiB, below its floor $floor KiB"
[ "$actual" -le $((target + 128 * 1024)) ] ||
	die "$idle at $actual KiB, more than one step above its target $target KiB"
guest_healthy "$idle" "$idle_console"

# The busy guest keeps what it uses.
used=$(($(domain_kib "$busy" available) - $(domain_kib "$busy" unused)))
[ "$(domain_kib "$busy" actual)" -ge "$used" ] ||
	die "$busy at $(domain_kib "$busy" actual) KiB, below the $used KiB it uses"
[ "$(domain_kib "$busy" actual)" -ge $((200 * 1024)) ] ||
	die "$busy at $(domain_kib "$busy" actual) KiB, below its 200 MiB hot workload"
guest_healthy "$busy" "$busy_console"
echo "$busy at $(domain_kib "$busy" actual) KiB, using $used KiB"

# The idle memory becomes hot: the guest reports early, the agent deflates.
wait_for_file_line "$idle_console" '^agent-idle: touching all' 200 ||
	die "the idle workload never touched its memory"
agent_wait_log 1 "domain=$idle KSTALED_EARLY_REPORT" 30
event=$(grep -m1 "domain=$idle KSTALED_EARLY_REPORT" "$agent_log")
decision=$(grep -A1000 -F "$event" "$agent_log" | grep -m1 "domain=$idle action=.* reason=early-report")
echo "$event"
echo "$decision"
echo "$decision" | grep -q "new-kib=$full " ||
	die "the early report did not bring $idle back to $full KiB"
delay=$(echo "$event" | sed -nE 's/.* delay-ms=([0-9]+).*/\1/p')
latency=$(($(log_ms "$decision") - $(log_ms "$event") + delay))
echo "early report to balloon request: $latency ms"
[ "$latency" -le 2000 ] || die "the agent took $latency ms to react to the early report"
deflated=$SECONDS
until [ "$(domain_kib "$idle" actual)" -eq "$full" ]; do
	[ $((SECONDS - deflated)) -lt 30 ] ||
		die "$idle still at $(domain_kib "$idle" actual) KiB 30 s after the early report"
	sleep 0.2
done
echo "$idle back at $full KiB $((SECONDS - deflated)) s after the agent's request"
wait_for_file_line "$idle_console" '^memload: touched all' 60 ||
	die "the idle workload did not finish touching its memory"
guest_healthy "$idle" "$idle_console"
agent_alive || die "the agent exited"
