#!/bin/bash
# Memory pressure without an early report: a guest whose idle memory is
# anonymous (tests/guest/agent-swap.sh) is ballooned down, its idle part
# going to zram; when its workload touches all of it again, the swap-ins
# in the guest's balloon statistics make the agent give all the memory
# back at once.  The early-report and major-fault signals are turned off,
# so only the swap-in rate can be the reason.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"

domain=kstaled-agent-swap
trap 'agent_cleanup $?; domain_destroy $domain; libvirt_stop' EXIT
libvirt_start
# The agent grows a guest by shortfall-gain times the memory swapped in:
# at 1000, the first second of swap-ins over 1 MiB/s is worth all of it.
# A small hysteresis makes the agent follow the target all the way down:
# with the default 64 MiB it may stop where nothing needs to be swapped.
agent_config --domains "$domain" scan-seconds=1 cold-age=5 min-cold-age=5 \
	min-memory-mib=128 hysteresis-mib=16 hysteresis-percent=0 \
	swap-backed-reclaim-percent=100 \
	stale-drop-mib=0 major-fault-rate=0 shortfall-gain=1000 pressure-holdoff=600
console=$(domain_start "$domain" 512 "kstaled_vm.run=agent-swap kstaled_vm.idle_seconds=75")
wait_for_file_line "$console" '^memload: ready' 120 ||
	die "workload did not start; console:
$(cat "$console")"
full=$((512 * 1024))

agent_start
start=$SECONDS
# 180 of the 200 MiB are idle: shrunk means well under the 512 MiB.
wait_balloon "$domain" -le $((384 * 1024)) 60
grep -q '^agent-swap: touching all' "$console" &&
	die "the workload woke up before the agent shrank $domain"
echo "$domain ballooned to $(domain_kib "$domain" actual) KiB after $((SECONDS - start)) s"

# Counted before the workload wakes: the agent may answer its swap-ins
# before this script has read the console and the balloon statistics.
swap_in="domain=$domain action=deflate reason=swap-in"
before=$(grep -c "$swap_in" "$agent_log" || true)
wait_for_file_line "$console" '^agent-swap: touching all' 120 ||
	die "the workload never touched its memory"
touched=$SECONDS
swapped_out=$(domain_kib "$domain" swap_out)
[ "${swapped_out:-0}" -gt 0 ] ||
	die "nothing of $domain was swapped out before its workload woke, so no swap-in can follow; agent log:
$(grep "domain=$domain action=" "$agent_log")"
echo "$domain had swapped out $swapped_out KiB"
# The histograms may show the grown working set a poll before the balloon
# statistics show the swap-ins, so a partial deflate for "grow" may come
# first; the swap-in deflate must follow and give everything back.
agent_wait_log $((before + 1)) "$swap_in" 30
decision=$(grep "$swap_in" "$agent_log" | sed -n "$((before + 1))p")
echo "$decision"
# Squeezing may itself swap in a little; the balloon must still have been
# down when the agent answered the swap-ins, or the deflate proves nothing.
actual=$(echo "$decision" | sed -n 's/.* actual-kib=\([0-9]*\) .*/\1/p')
[ "${actual:-$full}" -lt "$full" ] ||
	die "$domain was already back at $full KiB when its swap-ins came; agent log:
$(grep "domain=$domain action=" "$agent_log")"
echo "$decision" | grep -q "new-kib=$full " ||
	die "the swap-ins did not bring $domain back to $full KiB"
grep -E "domain=$domain action=deflate reason=(early-report|major-faults)" "$agent_log" &&
	die "a signal that was turned off made the agent deflate"
wait_balloon "$domain" -eq "$full" 60
echo "$domain back at $full KiB $((SECONDS - touched)) s after its workload woke"
guest_healthy "$domain" "$console"
agent_alive || die "the agent exited"
