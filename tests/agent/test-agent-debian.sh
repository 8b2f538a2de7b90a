#!/bin/bash
# The agent balloons a real Debian guest running redis-server down toward
# its working set: 200 MiB of redis values of which only 1000 keys are
# read.  Afterwards every value still reads back intact (redis' digest of
# the whole data set, before and after), the guest's journal has no OOM
# kill, and the balloon never went below the floor.  Then the guest
# reboots under the agent, and kstaled reports again after the reboot.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/lib-debian.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"

dom=kstaled-agent-debian
mem_mib=1024 floor_mib=384 keys=51200 value_bytes=4096 hot_keys=1000
trap 'agent_cleanup $?; debian_destroy $dom; libvirt_stop' EXIT
libvirt_start
debian_boot "$dom" $mem_mib >/dev/null
full=$((mem_mib * 1024))

redis_populate "$dom" $keys $value_bytes >/dev/null
digest=$(guest_sh "$dom" 'redis-cli DEBUG DIGEST')
redis_start_reader "$dom" $hot_keys
echo "redis holds $keys keys of $value_bytes B, digest $digest; $hot_keys keys read every second"

agent_config --domains "$dom" scan-seconds=1 cold-age=15 min-cold-age=15 \
	headroom-percent=10 headroom-mib=64 \
	min-memory-mib=$floor_mib hysteresis-mib=16 hysteresis-percent=0 max-step-mib=128 \
	stale-drop-mib=64 pressure-holdoff=60 swap-backed-reclaim-percent=100
agent_start
start=$SECONDS
# The idle redis values and idle page cache go: at least 256 MiB back.
wait_balloon "$dom" -le $((full - 256 * 1024)) 300
echo "the agent took $(((full - $(domain_kib "$dom" actual)) >> 10)) MiB back in $((SECONDS - start)) s"
lowest=$full
for _ in $(seq 30); do
	actual=$(domain_kib "$dom" actual)
	[ "$actual" -lt "$lowest" ] && lowest=$actual
	sleep 1
done
echo "balloon at $(domain_kib "$dom" actual) KiB; lowest seen $lowest KiB, floor $((floor_mib * 1024)) KiB"
# Less than 1 MiB under: the balloon driver inflates by whole page arrays.
[ "$lowest" -ge $((floor_mib * 1024 - 1024)) ] || die "the balloon went to $lowest KiB, below the floor"
"$ctl_bin" --state-file "$agent_state"

after=$(guest_sh "$dom" 'redis-cli DEBUG DIGEST' 600)
[ "$after" = "$digest" ] || die "redis' data changed under the balloon: digest $after, was $digest"
echo "every redis value reads back intact (digest $after)"
oom=$(guest_oom_kills "$dom")
[ -z "$oom" ] || die "the guest's kernel killed for lack of memory:
$oom"
[ "$(guest_sh "$dom" 'redis-cli ping')" = PONG ] || die "redis-server does not answer"

# A reboot under the agent: the new kernel's kstaled reports again.
scans=$(virsh_ qemu-monitor-command "$dom" '{"execute":"query-kstaled"}' | jq '.return."guest-scans"')
virsh_ reboot "$dom" --mode agent >/dev/null || die "virsh reboot $dom failed"
agent_wait_log 1 "domain=$dom rebooted" 120
debian_wait_agent "$dom" 600 || die "$dom did not come back after the reboot"
deadline=$((SECONDS + 300))
until now=$(virsh_ qemu-monitor-command "$dom" '{"execute":"query-kstaled"}' | jq '.return."guest-scans" // 0') &&
	[ "$now" -ge 1 ] && [ "$now" -lt "$scans" ]; do
	[ $SECONDS -lt $deadline ] || die "no report from the rebooted guest's kstaled (guest-scans $now, $scans before the reboot)"
	sleep 2
done
echo "after the reboot kstaled reports again: guest scan $now (was $scans before)"
decisions=$(grep -c "domain=$dom action=" "$agent_log")
agent_wait_log $((decisions + 1)) "domain=$dom action=" 120
agent_alive || die "the agent exited"
