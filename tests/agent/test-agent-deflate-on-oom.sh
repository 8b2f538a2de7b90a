#!/bin/bash
# A guest whose balloon deflates on OOM keeps the balloon in its MemTotal
# and counts it as allocated.  The agent reads autodeflate='on' from the
# domain XML and takes the balloon out of the guest's used memory: it
# balloons the guest down near its working set, as it does a guest without
# the feature (test-agent-balloon.sh), instead of taking each step's
# balloon for working set and stopping far above it.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"

domain=kstaled-agent-doom
trap 'agent_cleanup $?; domain_destroy $domain; libvirt_stop' EXIT
libvirt_start
agent_config --domains "$domain" scan-seconds=1 cold-age=5 min-cold-age=5 headroom-percent=10 headroom-mib=32 \
	min-memory-mib=128 hysteresis-mib=16 hysteresis-percent=0 max-step-mib=128 \
	swap-backed-reclaim-percent=100
console=$(KSTALED_BALLOON_AUTODEFLATE=on domain_start "$domain" 512 "kstaled_vm.run=agent-idle")
virsh_ dumpxml "$domain" | grep -q "<memballoon model='virtio' autodeflate='on'" ||
	die "$domain's balloon does not deflate on OOM: $(virsh_ dumpxml "$domain" | grep memballoon)"
wait_for_file_line "$console" '^memload: ready' 120 ||
	die "workload did not start; console:
$(cat "$console")"

agent_start
start=$SECONDS
# memload keeps 40 of its 300 MiB hot: with the balloon counted as used
# memory, the agent would stop near 315 MiB, where the balloon it took
# looks like the working set the rest of the guest needs.
wait_balloon "$domain" -le $((256 * 1024)) 150
echo "$domain ballooned to $(domain_kib "$domain" actual) KiB after $((SECONDS - start)) s"
# Settled: within the hysteresis of its target.
deadline=$((SECONDS + 90))
until jq -e --arg d "$domain" '.domains[] | select(.name == $d) | .decision.reason == "hysteresis"' \
	"$agent_state" >/dev/null 2>&1; do
	[ $SECONDS -lt $deadline ] || die "$domain did not settle in 90 s; agent log:
$(grep "domain=$domain action=" "$agent_log" | tail -20)"
	sleep 1
done
actual=$(domain_kib "$domain" actual)
available=$(domain_kib "$domain" available)
decision=$(jq -c --arg d "$domain" '.domains[] | select(.name == $d) | .decision' "$agent_state")
echo "$domain settled at $actual KiB, its MemTotal at $available KiB"
echo "last decision: $decision"
virsh_ domstats --balloon "$domain"
[ "$available" -ge $((448 * 1024)) ] ||
	die "MemTotal shrank with the balloon: the guest does not deflate on OOM"
working_set=$(echo "$decision" | jq '.["working-set-kib"]')
[ "$working_set" -le $((200 * 1024)) ] ||
	die "the agent takes $working_set KiB for $domain's working set, the balloon included"
guest_healthy "$domain" "$console"
agent_alive || die "the agent exited"
