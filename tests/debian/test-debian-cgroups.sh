#!/bin/bash
# query-kstaled on the Debian guest lists systemd's cgroups, system.slice
# and redis-server.service among them, each with its three histograms;
# and over consecutive reports the idle memory of all cgroups together
# never exceeds the memory the guest uses, nor does any cgroup's idle
# memory exceed its usage.  A report carries the histograms of the scan
# that just ended but the usage of the moment it is sent, so a cgroup
# that freed memory during the scan (a udev worker exiting) may show
# more idle memory than it now uses; a page idle for a scan was charged
# through the end of the scan before, so its cgroup's usage in the report
# before covers it.  A cgroup's idle memory is therefore checked against
# the larger of its usage in this report and in the one just before.
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
# A report that follows a missed one is not checked per cgroup, and does
# not count: it only gives the usage the next report is checked against.
last=-1 checked=0 prev_usage='{}'
while [ $checked -lt 10 ]; do
	report=$(query)
	reports=$(jq '.reports' <<<"$report")
	if [ "$reports" -eq "$last" ]; then sleep 0.3; continue; fi
	consecutive=$((reports == last + 1))
	last=$reports
	usage=$(jq -c '[.cgroups[] | {key: .path, value: ."memory-usage"}] | from_entries' <<<"$report")
	if [ $consecutive -eq 0 ]; then prev_usage=$usage; continue; fi
	idle=$(jq '[.cgroups[] | ."idle-clean"[0] + ."idle-dirty-file"[0] + ."idle-dirty-swap"[0]] | add' <<<"$report")
	used=$(guest_sh "$dom" "awk '/^MemTotal:/ { t = \$2 } /^MemFree:/ { f = \$2 } END { print (t - f) * 1024 }' /proc/meminfo")
	over=$(jq -c --argjson prev "$prev_usage" '[.cgroups[] |
		select(."idle-clean"[0] + ."idle-dirty-file"[0] + ."idle-dirty-swap"[0] >
		       ([."memory-usage", ($prev[.path] // 0)] | max)) | .path]' <<<"$report")
	echo "report $reports: idle $((idle >> 20)) MiB of $((used >> 20)) MiB used; cgroups idle beyond their usage now and before: $over"
	[ "$idle" -le "$used" ] || die "report $reports: idle $idle B exceeds the guest's used memory $used B"
	[ "$over" = '[]' ] || die "report $reports: idle beyond usage in $over"
	prev_usage=$usage
	checked=$((checked + 1))
done
