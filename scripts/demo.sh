#!/bin/bash
# The main job, from a fresh Debian 12 machine, as root: install what is
# needed, build the patched guest kernel (and its Debian packages), QEMU,
# the host agent and the Debian guest image, boot a Debian 12 guest with
# the kstaled device under libvirt and run the agent while redis-server in
# the guest changes its working set: 200 MiB of values of which a client
# reads only the first 1000 keys (the rest goes idle and the agent
# balloons the guest down), then every value for 30 s (the guest reports
# early and the agent gives the memory back), then the first 1000 again.
# Every few seconds one line shows the phase, redis' idle memory as kstaled
# reports it, the guest's used memory, the agent's target, the balloon,
# what the host really holds of the guest's RAM (the resident set of
# QEMU's guest-RAM mapping; free page reporting is on, as KubeVirt has
# it) and redis' latency; at the end a picture of the run over time is
# written.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/lib-debian.sh"

"$KSTALED_TOP/scripts/setup-host.sh"
build_dir=${KSTALED_BUILD_DIR:-$KSTALED_TOP/build}
meson_build "$build_dir"
export KSTALED_QEMU=$build_dir/qemu-system-x86_64 KSTALED_DEBIAN_IMAGE=$build_dir/debian-image.raw
agent=$build_dir/host-agent/kstaled-agent ctl=$build_dir/host-agent/kstaled-ctl

domain=kstaled-demo
mem_mib=1024 keys=51200 value_bytes=4096 hot_keys=1000
sweep_at=120 sweep_seconds=30 samples=110 interval=2
out=${KSTALED_DEMO_OUTPUT:-$KSTALED_CACHE/demo/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
agent_pid=
trap '[ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null; debian_destroy $domain; libvirt_stop' EXIT
libvirt_start
log "booting the Debian 12 guest $domain ($mem_mib MiB, disk $(debian_image))"
console=$(KSTALED_BALLOON_FREE_PAGE_REPORTING=on debian_boot "$domain" $mem_mib)
qemu_pid=$(domain_qemu_pid "$domain")
log "booted: $(guest_sh "$domain" 'uname -r; systemctl is-system-running' | paste -sd ' ')"
log "guest console: $console"

dataset=$(redis_populate "$domain" $keys $value_bytes)
redis_start_reader "$domain" $hot_keys
log "redis-server holds $((dataset >> 20)) MiB; a client reads $hot_keys of its $keys keys every second"
log "what the host sees: virsh qemu-monitor-command $domain '{\"execute\":\"query-kstaled\"}'"
virsh_ qemu-monitor-command "$domain" --pretty '{"execute":"query-kstaled"}' |
	jq '.return | .cgroups |= map(select(.path == "/system.slice/redis-server.service"))'

cat >"$out/agent.conf" <<CONF
[agent]
uri=$LIBVIRT_URI
poll-interval=2
balloon-stats-period=1
state-file=$out/state.json
host-low-percent=100
[policy]
scan-seconds=1
cold-age=15
min-cold-age=15
min-memory-mib=384
pressure-holdoff=60
swap-backed-reclaim-percent=100
CONF
"$agent" --config "$out/agent.conf" >"$out/agent.log" 2>&1 &
agent_pid=$!
log "kstaled-agent started (its decisions are the 'action=' lines below)"

mib() { echo $((${1:-0} >> 20)); }
# sample T PHASE: one line on the terminal and one CSV row: redis'
# memory idle for >= 1, 5, 15 and 60 scans, the guest's used memory, the
# agent's target, the balloon, the host's resident guest RAM and QEMU's
# own memory, and the reader's latency.
sample() {
	local report idle used target actual latency host_ram qemu_own
	report=$(virsh_ qemu-monitor-command "$domain" '{"execute":"query-kstaled"}')
	idle=$(jq -r '[.return.cgroups[] | select(.path == "/system.slice/redis-server.service")][0] as $c |
		[0, 2, 3, 5] | map($c["idle-clean"][.] + $c["idle-dirty-file"][.] + $c["idle-dirty-swap"][.]) | @tsv' <<<"$report")
	read -r used latency < <(guest_sh "$domain" "awk '/^MemTotal:/ { t = \$2 } /^MemAvailable:/ { a = \$2 }
		END { printf \"%d \", (t - a) * 1024 }' /proc/meminfo; cat /run/redis-reader.ms")
	target=$(jq -r --arg d "$domain" '.domains[] | select(.name == $d) | .decision["target-kib"] // 0' \
		"$out/state.json" 2>/dev/null || echo 0)
	actual=$(domain_kib "$domain" actual)
	read -r host_ram qemu_own < <(qemu_rss_kib "$qemu_pid" $mem_mib)
	read -r i1 i5 i15 i60 <<<"$idle"
	echo "$1,$2,$i1,$i5,$i15,$i60,$used,$((target * 1024)),$((actual * 1024)),$((host_ram * 1024)),$((qemu_own * 1024)),$latency" >>"$out/demo.csv"
	printf '%4ds %-9s redis idle >=1 scan %4d, >=15 scans %4d MiB | guest used %4d MiB | agent target %4d MiB | balloon %4d MiB | host holds %4d MiB | redis %3d ms\n' \
		"$1" "$2" "$(mib "$i1")" "$(mib "$i15")" "$(mib "$used")" $((target >> 10)) $((actual >> 10)) $((host_ram >> 10)) "$latency"
}

echo "seconds,phase,idle_1,idle_5,idle_15,idle_60,guest_used,agent_target,balloon,host_guest_ram,qemu_own,redis_ms" >"$out/demo.csv"
start=$SECONDS phase=idle shown=0
for _ in $(seq $samples); do
	t=$((SECONDS - start))
	if [ "$phase" = idle ] && [ $t -ge $sweep_at ]; then
		redis_sweep "$domain" $sweep_seconds
		phase=sweep
		log "redis' client now reads every value for $sweep_seconds s"
	elif [ "$phase" = sweep ] && [ $t -ge $((sweep_at + sweep_seconds)) ]; then
		phase=idle-again
		log "redis' client reads only $hot_keys keys again"
	fi
	sample "$t" "$phase"
	# The agent's decisions since the last line.
	tail -n +$((shown + 1)) "$out/agent.log" | grep -E 'action=(inflate|deflate)' | sed 's/^/    /' || true
	shown=$(wc -l <"$out/agent.log")
	kill -0 "$agent_pid" 2>/dev/null || die "the agent exited; log: $(cat "$out/agent.log")"
	sleep $interval
done

log "the agent's view (kstaled-ctl):"
"$ctl" --state-file "$out/state.json"
[ "$(guest_sh "$domain" 'redis-cli ping')" = PONG ] || die "redis-server stopped answering"
oom=$(guest_oom_kills "$domain")
[ -z "$oom" ] || die "the guest ran out of memory:
$oom"
/usr/bin/python3 "$KSTALED_TOP/scripts/demo-plot.py" "$out/demo.csv" "$out/demo.png" $keys $hot_keys
log "done: redis answered throughout and the guest never ran out of memory"
log "the run over time: $out/demo.png (data: $out/demo.csv, agent log: $out/agent.log)"
