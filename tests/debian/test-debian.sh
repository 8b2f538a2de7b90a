#!/bin/bash
# The Debian 12 guest image, booted once under libvirt, checked four
# ways in turn (each check is one function below, with its own comment):
# the boot itself, the cgroups query-kstaled reports, kstaled's idle
# memory of a redis-server against what redis holds, and free page
# reporting seen from the host.  One boot of the
# guest under TCG costs about half a minute, so the checks share it; none
# changes what the next one looks at, except that the cgroup check runs
# before redis is filled.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/lib-debian.sh"

dom=kstaled-debian
mem_mib=1024

query_kstaled() {
	virsh_ qemu-monitor-command "$dom" '{"execute":"query-kstaled"}' | jq -c '.return'
}

# redis_cgroup: redis-server.service's record of the device's report, with
# the guest's scan count.
redis_cgroup() {
	query_kstaled | jq -c '{scans: ."guest-scans"} + (.cgroups[] | select(.path == "/system.slice/redis-server.service"))'
}

# check_boot: the guest booted from its disk into the kstaled kernel
# installed from the project's package: systemd reached multi-user.target
# with no failed unit, swap is on zram, udev loaded the virtio_kstaled
# module for the device, kstaled scans, the driver reports to the device,
# and redis-server answers.
check_boot() {
	local release failed scan_seconds reports
	release=$(guest_sh "$dom" 'uname -r')
	echo "kernel: $release"
	case "$release" in *-kstaled) ;; *) die "the guest runs $release, not the kstaled kernel" ;; esac
	guest_sh "$dom" "dpkg-query -W -f='\${Package} \${Version} \${Status}\n' linux-image-$release" |
		tee /dev/stderr | grep -q ' install ok installed$' ||
		die "linux-image-$release is not installed as a package in the guest"
	guest_sh "$dom" 'systemctl is-active multi-user.target' >/dev/null ||
		die "multi-user.target is not active"
	failed=$(guest_sh "$dom" 'systemctl --failed --plain --no-legend')
	[ -z "$failed" ] || die "failed units in the guest:
$failed
$(guest_sh "$dom" 'journalctl -b -p warning --no-pager | tail -n 40')"

	guest_sh "$dom" 'swapon --show=NAME --noheadings' | grep -qx /dev/zram0 ||
		die "no zram swap in the guest: $(guest_sh "$dom" 'swapon --show')"
	# The package ships the driver as a module; nothing but the device's
	# modalias loads it.
	guest_sh "$dom" 'cat /proc/modules' | grep -q '^virtio_kstaled ' ||
		die "udev did not load the virtio_kstaled module: $(guest_sh "$dom" 'cat /proc/modules')"
	scan_seconds=$(guest_sh "$dom" 'cat /sys/kernel/mm/kstaled/scan_seconds')
	[ "$scan_seconds" -ge 1 ] || die "kstaled is not scanning (scan_seconds $scan_seconds)"
	[ "$(guest_sh "$dom" 'redis-cli ping')" = PONG ] || die "redis-server does not answer"
	reports=$(query_kstaled | jq .reports)
	[ "$reports" -ge 1 ] || die "the device has no report from the guest's driver"
	echo "kstaled scans every $scan_seconds s; the device has $reports reports; redis answers"
}

# check_cgroups: query-kstaled lists systemd's cgroups, system.slice and
# redis-server.service among them, each with its three histograms; and
# over consecutive reports the idle memory of all cgroups together never
# exceeds the memory the guest uses, nor does any cgroup's idle memory
# exceed its usage.  A report carries the histograms of the scan that
# just ended but the usage of the moment it is sent, so a cgroup that
# freed memory during the scan (a udev worker exiting) may show more
# idle memory than it now uses; a page idle for a scan was charged
# through the end of the scan before, so its cgroup's usage in the report
# before covers it.  A cgroup's idle memory is therefore checked against
# the larger of its usage in this report and in the one just before.
check_cgroups() {
	local deadline report reports last checked prev_usage consecutive usage idle used over
	deadline=$((SECONDS + 120))
	until query_kstaled | jq -e '[.cgroups[].path] | index("/system.slice") and index("/system.slice/redis-server.service")' >/dev/null; do
		[ $SECONDS -lt $deadline ] || die "no report lists system.slice and redis-server.service: $(query_kstaled | jq -c '[.cgroups[].path]')"
		sleep 1
	done
	report=$(query_kstaled)
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
		report=$(query_kstaled)
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
}

# check_redis: redis-server holds 200 MiB of values, of which a reader
# touches only the first 1000 keys (about 4 MiB) every second.  After 40
# scans kstaled's idle memory of redis-server.service (idle for at least
# 15 scans, all kinds) is within 5 % of guest memory of what that
# implies: the data set redis reports, less the part the reader touches.
check_redis() {
	local keys=51200 value_bytes=4096 hot_keys=1000 min_scans_index=3 wait_scans=40
	local dataset expected start_scans deadline cg idle usage tolerance diff
	# 51200 values of 4 KiB: 200 MiB.
	dataset=$(redis_populate "$dom" $keys $value_bytes)
	redis_start_reader "$dom" $hot_keys
	[ "$dataset" -ge $((keys * value_bytes)) ] ||
		die "redis holds $dataset B, less than the $((keys * value_bytes)) B populated"
	expected=$((dataset - dataset * hot_keys / keys))
	echo "redis data set $((dataset >> 20)) MiB, $hot_keys of $keys keys read every second: $((expected >> 20)) MiB should be idle"

	start_scans=$(redis_cgroup | jq '.scans')
	deadline=$((SECONDS + wait_scans * 4))
	until [ "$(redis_cgroup | jq '.scans')" -ge $((start_scans + wait_scans)) ]; do
		[ $SECONDS -lt $deadline ] || die "the guest did not scan $wait_scans times in $((wait_scans * 4)) s"
		sleep 2
	done
	cg=$(redis_cgroup)
	idle=$(jq --argjson i $min_scans_index '."idle-clean"[$i] + ."idle-dirty-file"[$i] + ."idle-dirty-swap"[$i]' <<<"$cg")
	usage=$(jq '."memory-usage"' <<<"$cg")
	tolerance=$((mem_mib * 1024 * 1024 * 5 / 100))
	diff=$((idle - expected))
	echo "after $wait_scans scans: redis-server.service uses $((usage >> 20)) MiB, kstaled reports $((idle >> 20)) MiB idle for >= 15 scans; expected $((expected >> 20)) MiB, off by $((diff >> 20)) MiB ($((diff * 10000 / (mem_mib * 1024 * 1024))) / 10000 of guest memory)"
	[ "${diff#-}" -le "$tolerance" ] ||
		die "kstaled's idle memory for redis is $diff B off, beyond 5 % of guest memory ($tolerance B)"
	[ "$(guest_sh "$dom" 'systemctl is-active redis-reader')" = active ] || die "the reader stopped"
}

# check_free_page_reporting: the guest allocates and writes 384 MiB, then
# frees it; free page reporting (on in this domain's <memballoon>) hands
# the freed memory back, which the host sees as the guest-RAM mapping of
# QEMU shrinking by at least 256 MiB within 60 s.  Without the feature
# the mapping keeps what the guest once touched.  Prints the host's view.
check_free_page_reporting() {
	local pid before during after deadline given_back rss start
	pid=$(domain_qemu_pid "$dom")
	read -r before _ < <(qemu_rss_kib "$pid" $mem_mib)
	guest_sh "$dom" 'systemd-run --unit=fpr-alloc stress-ng --vm 1 --vm-bytes 384M --vm-keep --timeout 20s' >/dev/null ||
		die "cannot start stress-ng in the guest"
	deadline=$((SECONDS + 60))
	during=$before
	while [ "$(guest_sh "$dom" 'systemctl is-active fpr-alloc' || true)" = active ]; do
		[ $SECONDS -lt "$deadline" ] || die "stress-ng ran past 60 s"
		read -r rss _ < <(qemu_rss_kib "$pid" $mem_mib)
		[ "$rss" -le "$during" ] || during=$rss
		sleep 1
	done
	start=$SECONDS deadline=$((SECONDS + 60))
	while read -r after _ < <(qemu_rss_kib "$pid" $mem_mib) &&
		given_back=$((during - after)) && [ $given_back -lt $((256 * 1024)) ]; do
		[ $SECONDS -lt "$deadline" ] ||
			die "guest RAM resident on the host: $((before >> 10)) MiB before, $((during >> 10)) MiB with 384 MiB written, still $((after >> 10)) MiB 60 s after it was freed"
		sleep 1
	done
	echo "guest RAM resident on the host: $((before >> 10)) MiB before, $((during >> 10)) MiB with 384 MiB written, $((after >> 10)) MiB $((SECONDS - start)) s after it was freed ($((given_back >> 10)) MiB given back by free page reporting)"
}

trap 'debian_destroy $dom; libvirt_stop' EXIT
libvirt_start
start=$SECONDS
KSTALED_BALLOON_FREE_PAGE_REPORTING=on debian_boot "$dom" $mem_mib >/dev/null
echo "booted to $(guest_sh "$dom" 'systemctl is-system-running') in $((SECONDS - start)) s"
check_boot
check_cgroups
check_redis
check_free_page_reporting
