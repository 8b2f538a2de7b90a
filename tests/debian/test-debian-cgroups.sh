#!/bin/bash
# query-kstaled on the Debian guest lists systemd's cgroups, system.slice
# and redis-server.service among them, each with its three histograms;
# and over consecutive reports the idle memory of all cgroups together
# never exceeds the memory the guest uses, nor does any cgroup's idle
# memory exceed its usage.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/lib-debian.sh"

dom=kstaled-debian-cgroups
trap 'debian_destroy $dom; libvirt_stop' EXIT
libvirt_start
debian_boot "$dom" 1024 >/dev/null

query() { virsh_ qemu-monitor-command "$dom" '{"execute":"query-kstaled"}' | jq -c '.return'; }

deadline=$((SECONDS + 120))
until query | jq -e '[.cgroups[].path] | index("/system.slice") and index("/system.slice/redis-server.service")' >/dev/null; do
	[ $SECONDS -lt $deadline ] || die "no report lists system.slice and redis-server.service: $(query | jq -c '[.cgroups[].path]')"
	sleep 1
done
report=$(query)
echo "$(jq '.cgroups | length' <<<"$report") cgroups reported, among them:"
jq -r '.cgroups[] | select(.path | test("^/(system|user)\\.slice(/redis-server.service)?$|^/init.scope$")) |
	"  \(.path): usage \(."memory-usage") B, idle for >= 1 scan \([."idle-clean"[0], ."idle-dirty-file"[0], ."idle-dirty-swap"[0]] | add) B"' <<<"$report"
jq -e '[.cgroups[] | ."idle-clean", ."idle-dirty-file", ."idle-dirty-swap" | length == 8] | all' <<<"$report" >/dev/null ||
	die "a cgroup lacks one of the three 8-bucket histograms: $report"

# Ten consecutive reports: sum of every cgroup's idle memory (all kinds,
# idle for at least one scan) against MemTotal - MemFree read right after.
last=-1 checked=0
while [ $checked -lt 10 ]; do
	report=$(query)
	reports=$(jq '.reports' <<<"$report")
	if [ "$reports" -eq "$last" ]; then sleep 0.3; continue; fi
	last=$reports
	idle=$(jq '[.cgroups[] | ."idle-clean"[0] + ."idle-dirty-file"[0] + ."idle-dirty-swap"[0]] | add' <<<"$report")
	used=$(guest_sh "$dom" "awk '/^MemTotal:/ { t = \$2 } /^MemFree:/ { f = \$2 } END { print (t - f) * 1024 }' /proc/meminfo")
	over=$(jq -c '[.cgroups[] | select(."idle-clean"[0] + ."idle-dirty-file"[0] + ."idle-dirty-swap"[0] > ."memory-usage") | .path]' <<<"$report")
	echo "report $reports: idle $((idle >> 20)) MiB of $((used >> 20)) MiB used; cgroups idle beyond their usage: $over"
	[ "$idle" -le "$used" ] || die "report $reports: idle $idle B exceeds the guest's used memory $used B"
	[ "$over" = '[]' ] || die "report $reports: idle beyond usage in $over"
	checked=$((checked + 1))
done
