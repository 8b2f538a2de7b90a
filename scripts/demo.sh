#!/bin/bash
# The main job, from a fresh Debian 12 machine, as root: install what is
# needed, build the patched guest kernel, QEMU, the host agent and the
# guest image, boot a guest with the kstaled device under libvirt and run
# the agent while the guest's workload changes: most of its memory goes
# idle (the agent balloons the guest down), then all of it is touched at
# once (the guest reports early, the agent gives the memory back), then it
# goes idle again.  Every few seconds one line shows the workload, the
# guest's idle memory as kstaled reports it, the agent's target and the
# balloon.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"

"$KSTALED_TOP/scripts/setup-host.sh"
build_dir=${KSTALED_BUILD_DIR:-$KSTALED_TOP/build}
meson_build "$build_dir"
export KSTALED_KERNEL=$build_dir/bzImage KSTALED_QEMU=$build_dir/qemu-system-x86_64 \
	KSTALED_INITRAMFS=$build_dir/tests/initramfs.cpio.gz
agent=$build_dir/host-agent/kstaled-agent ctl=$build_dir/host-agent/kstaled-ctl

domain=kstaled-demo
work=$(mktemp -d /var/tmp/kstaled-demo.XXXXXX)
agent_pid=
trap '[ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null; domain_destroy $domain; libvirt_stop; rm -rf "$work"' EXIT
libvirt_start
# tests/guest/demo-workload.sh: 248 MiB allocated, 24 MiB of it hot, all
# of it touched once after 100 s.
console=$(domain_start "$domain" 512 "kstaled_vm.run=demo-workload kstaled_vm.idle_seconds=100")
log "domain $domain started; guest console: $console"
wait_for_file_line "$console" '^memload: ready' 120 || die "guest did not boot; see $console"
grep '^KSTALED-VM-BOOTED' "$console"

log "what the host sees: virsh qemu-monitor-command $domain '{\"execute\":\"query-kstaled\"}'"
sleep 5
virsh_ qemu-monitor-command "$domain" --pretty '{"execute":"query-kstaled"}' |
	jq '.return | .cgroups |= map(select(.path == "/demo"))'

cat >"$work/agent.conf" <<CONF
[agent]
uri=$LIBVIRT_URI
poll-interval=2
balloon-stats-period=1
state-file=$work/state.json
[policy]
min-memory-mib=192
pressure-holdoff=60
reclaim-swap-backed=true
CONF
"$agent" --config "$work/agent.conf" >"$work/agent.log" 2>&1 &
agent_pid=$!
log "kstaled-agent started (log: the 'action=' lines below)"

mib() { echo $((${1:-0} / 1048576)); }
show() {
	local report idle1 idle5 actual target
	report=$(virsh_ qemu-monitor-command "$domain" '{"execute":"query-kstaled"}')
	read -r idle1 idle5 < <(jq -r '[.return.cgroups[] | select(.path == "/demo")][0] |
		[(.["idle-clean"][0] + .["idle-dirty-file"][0] + .["idle-dirty-swap"][0]),
		 (.["idle-clean"][2] + .["idle-dirty-file"][2] + .["idle-dirty-swap"][2])] |
		@tsv' <<<"$report")
	actual=$(domain_kib "$domain" actual)
	target=$(jq -r --arg d "$domain" '.domains[] | select(.name == $d) |
		.decision["target-kib"] // 0' "$work/state.json" 2>/dev/null || echo 0)
	printf '%s  workload idle >=1 scan %4d MiB, >=5 scans %4d MiB | agent target %4d MiB | balloon %4d MiB | %s\n' \
		"$(date +%T)" "$(mib "$idle1")" "$(mib "$idle5")" $((target / 1024)) \
		$((actual / 1024)) "$(grep '^demo-workload:' "$console" | tail -n 1)"
}
shown=0
for _ in $(seq 75); do
	show
	# The agent's decisions since the last line.
	tail -n +$((shown + 1)) "$work/agent.log" | grep -E 'action=(inflate|deflate)' | sed 's/^/    /' || true
	shown=$(wc -l <"$work/agent.log")
	sleep 3
	kill -0 "$agent_pid" 2>/dev/null || die "the agent exited; log: $(cat "$work/agent.log")"
done

log "the agent's view (kstaled-ctl):"
"$ctl" --state-file "$work/state.json"
if grep -E 'Out of memory|invoked oom-killer' "$console"; then
	die "the guest ran out of memory"
fi
log "done: the guest never ran out of memory"
