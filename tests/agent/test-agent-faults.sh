#!/bin/bash
# Faults around a guest the agent is ballooning: the agent killed in the
# middle of shrinking it (the balloon is never left below the floor, and a
# new agent carries on), libvirtd restarted under the agent, the guest
# rebooted (it gets its memory back at once), and its QEMU killed (the
# agent forgets the domain and keeps running).
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"

domain=kstaled-agent-faults
trap 'agent_cleanup $?; domain_destroy $domain; libvirt_stop' EXIT
libvirt_start
# Small steps, so that the agent is killed between two of them.
agent_config --domains "$domain" scan-seconds=1 cold-age=5 min-cold-age=5 \
	headroom-percent=10 headroom-mib=32 min-memory-mib=128 \
	hysteresis-mib=16 hysteresis-percent=0 max-step-mib=32 \
	swap-backed-reclaim-percent=100

console=$(domain_start "$domain" 512 "kstaled_vm.run=agent-idle kstaled_vm.idle_seconds=100000")
wait_for_file_line "$console" '^memload: ready' 120 ||
	die "workload did not start; console:
$(cat "$console")"
full=$((512 * 1024))

# Killed mid-decision: right after its second step down.
agent_start
agent_wait_log 2 "domain=$domain action=inflate" 120
kill -9 "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
agent_pid=
floor=$(jq --arg d "$domain" '.domains[] | select(.name == $d) | .decision["floor-kib"]' "$agent_state")
sleep 2
actual=$(domain_kib "$domain" actual)
echo "agent killed at $actual KiB (floor $floor KiB)"
# Less than 1 MiB under: the guest's balloon driver inflates by whole page
# arrays.
{ [ "$actual" -ge $((floor - 1024)) ] && [ "$actual" -lt "$full" ]; } ||
	die "after the kill the balloon is at $actual KiB (floor $floor, max $full)"
agent_start
agent_wait_log 3 "domain=$domain action=inflate" 60
[ "$(domain_kib "$domain" actual)" -lt "$actual" ] ||
	die "the restarted agent did not carry on shrinking $domain"
guest_healthy "$domain" "$console"

# libvirtd restarts: the agent reconnects and keeps deciding.
libvirtd_restart
agent_wait_log 2 "connected to $LIBVIRT_URI" 60
decisions=$(grep -c "domain=$domain action=" "$agent_log")
agent_wait_log $((decisions + 1)) "domain=$domain action=" 30
echo "reconnected after the libvirtd restart"

# The guest reboots: all its memory back at once, before its new kernel
# has reported anything.
before=$(grep -c '^memload: ready' "$console")
virsh_ reset "$domain" >/dev/null
agent_wait_log 1 "domain=$domain rebooted" 30
agent_wait_log 1 "domain=$domain action=deflate reason=reboot .* new-kib=$full " 30
deadline=$((SECONDS + 120))
until [ "$(grep -c '^memload: ready' "$console")" -gt "$before" ]; do
	[ $SECONDS -lt $deadline ] || die "the guest did not boot again; console:
$(tail -30 "$console")"
	sleep 0.5
done
# QEMU's "actual" keeps the old kernel's balloon until the new driver
# moves it, so ask the guest: without the deflation its new driver would
# inflate the balloon back to the old target, leaving MemTotal near
# $actual KiB.
deadline=$((SECONDS + 30))
until [ "$(domain_kib "$domain" available)" -ge $((460 * 1024)) ]; do
	[ $SECONDS -lt $deadline ] ||
		die "the rebooted guest sees $(domain_kib "$domain" available) KiB, not its $full KiB"
	sleep 0.5
done
echo "rebooted guest sees $(domain_kib "$domain" available) KiB of its $full KiB"

# QEMU dies: the agent forgets the domain and keeps running.
kill -9 "$(cat "/run/libvirt/qemu/$domain.pid")"
agent_wait_log 1 "domain=$domain stopped" 30
sleep 2
agent_alive || die "the agent died with the domain's QEMU"
! jq -e --arg d "$domain" '.domains[] | select(.name == $d)' "$agent_state" >/dev/null ||
	die "the state file still lists the dead domain"
agent_stop
grep -E "domain=$domain (rebooted|stopped|started)|connected to|reconnecting" "$agent_log"
