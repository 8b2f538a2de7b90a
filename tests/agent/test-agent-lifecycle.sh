#!/bin/bash
# Which domains the agent talks to, and when.  A domain whose XML gives it
# no kstaled device never gets a monitor command, so libvirt does not taint
# it "custom-monitor", while the agent manages (and so taints) the domain
# beside it that has the device.  A paused domain is not ballooned; on
# resume, an inflation asked for before the pause gets its settling time
# again instead of being followed at once by the next step.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"

dev=kstaled-agent-life
nodev=kstaled-agent-life-nodev
trap 'agent_cleanup $?; domain_destroy $dev; domain_destroy $nodev; libvirt_stop' EXIT
libvirt_start
# Steps large enough that the guest is still inflating when it is paused.
agent_config --domains "$dev $nodev" scan-seconds=1 cold-age=5 min-cold-age=5 headroom-percent=10 headroom-mib=32 \
	min-memory-mib=128 hysteresis-mib=16 hysteresis-percent=0 max-step-mib=256 \
	swap-backed-reclaim-percent=100

dev_mark=$(domain_log_mark "$dev")
nodev_mark=$(domain_log_mark "$nodev")
dev_console=$(domain_start "$dev" 512 "kstaled_vm.run=agent-idle")
nodev_console=$(domain_start --without-kstaled "$nodev" 256 "")
wait_for_file_line "$nodev_console" '^KSTALED-VM-READY' 120 ||
	die "$nodev did not boot; console:
$(cat "$nodev_console")"
wait_for_file_line "$dev_console" '^memload: ready' 120 ||
	die "workload did not start; console:
$(cat "$dev_console")"

agent_start
agent_wait_log 1 "domain=$nodev has no kstaled device in its XML; leaving it alone" 30
# Paused right after the agent asks for a step of 100 MiB or more, which
# takes the guest (swapping to zram under TCG) a while.
deadline=$((SECONDS + 120))
while :; do
	step=$({ grep "domain=$dev action=inflate" "$agent_log" || true; } |
		sed -nE 's/.* actual-kib=([0-9]+) new-kib=([0-9]+) .*/\1 \2/p' |
		awk '$1 - $2 >= 100 * 1024 { print $2 }' | tail -1)
	[ -z "$step" ] || break
	[ $SECONDS -lt $deadline ] || die "no inflation by 100 MiB or more in 120 s; agent log:
$(cat "$agent_log")"
	sleep 0.1
done
virsh_ suspend "$dev" >/dev/null
request=$step
paused_at=$(domain_kib "$dev" actual)
echo "$dev paused at $paused_at KiB, the agent having asked for $request KiB"

# Paused: it is seen, and left as it is while every other poll goes on.
agent_wait_log 1 "domain=$dev is paused; not ballooning it" 10
decisions=$(grep -c "domain=$dev action=" "$agent_log")
sleep 12			# over the policy's 10 s of settling
[ "$(grep -c "domain=$dev action=" "$agent_log")" -eq "$decisions" ] ||
	die "the agent decided about $dev while it was paused:
$(grep "domain=$dev action=" "$agent_log" | tail -3)"
[ "$(domain_kib "$dev" actual)" -eq "$paused_at" ] ||
	die "$dev's balloon moved while it was paused"

virsh_ resume "$dev" >/dev/null
agent_wait_log 1 "domain=$dev resumed" 10
agent_wait_log 1 "domain=$dev runs again; managing it" 10
agent_wait_log $((decisions + 1)) "domain=$dev action=" 10
after=$(grep "domain=$dev action=" "$agent_log" | sed -n "$((decisions + 1))p")
echo "first decision after the resume: $after"
actual=$(echo "$after" | sed -nE 's/.* actual-kib=([0-9]+) .*/\1/p')
if [ "$actual" -gt $((request + 1024)) ]; then
	# Still inflating towards the request, which the pause kept it from.
	echo "$after" | grep -q "reason=settling" ||
		die "the agent took the next step before $dev reached $request KiB: $after"
else
	echo "(the guest had reached $request KiB before the pause: nothing to settle)"
fi
wait_balloon "$dev" -le $((request + 1024)) 60
guest_healthy "$dev" "$dev_console"

# Many polls later: the domain without the device was never sent a monitor
# command, the one with it was.
polls=$(grep -c "domain=$dev action=" "$agent_log")
agent_wait_log $((polls + 10)) "domain=$dev action=" 30
if domain_log_since "$nodev" "$nodev_mark" | grep custom-monitor; then
	die "the agent sent $nodev a monitor command"
fi
domain_log_since "$dev" "$dev_mark" | grep -q custom-monitor ||
	die "libvirt logged no custom-monitor taint for $dev, which the agent queried"
echo "$nodev untainted after $(grep -c "domain=$dev action=" "$agent_log") polls of $dev"
grep -E "domain=$dev (action=inflate|is paused|resumed|runs again)|domain=$nodev" "$agent_log"
agent_alive || die "the agent exited"
