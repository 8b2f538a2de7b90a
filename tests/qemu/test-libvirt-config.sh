#!/bin/bash
# The host steers the guest's scanner through the device: kstaled-set-config
# and qom-set of scan-seconds reach /sys/kernel/mm/kstaled/scan_seconds in
# the guest.  virsh save / virsh restore (a migration to a file, into a new
# QEMU started with the domain XML's scan-seconds=1) keeps the settings the
# host set at run time and the counters, and the restored device asks the
# guest for a fresh report, which comes within a second.  A setting the
# guest's administrator made since stands until the host changes it.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/qemu/lib-device.sh"

device_domain_start kstaled-qemu-config
save=$KSTALED_CACHE/save-$domain.img
trap 'domain_destroy $domain; rm -f "$save"; libvirt_stop' EXIT

# guest_scan_seconds_becomes N: the guest printed that its scan period is N.
guest_scan_seconds_becomes() {
	wait_for_file_line "$console" "^QEMU-DEVICE-SCAN-SECONDS $1[[:space:]]*\$" 60 ||
		die "guest scan_seconds did not become $1; console:
$(grep QEMU-DEVICE-SCAN "$console")"
	echo "guest scan_seconds is $1"
}

guest_scan_seconds_becomes 1
qmp '{"execute":"kstaled-set-config","arguments":{"scan-seconds":3,"stale-page-age":7}}' >/dev/null
guest_scan_seconds_becomes 3
qmp '{"execute":"qom-set","arguments":{"path":"/machine/peripheral/kstaled0",
	"property":"scan-seconds","value":4}}' >/dev/null
guest_scan_seconds_becomes 4
kstaled_query '."scan-seconds" == 4 and ."stale-page-age" == 7' >/dev/null ||
	die "query-kstaled does not show the settings: $(kstaled_query)"

wait_for_query '.reports > 0' 60 || die "no report from the guest: $(kstaled_query)"
counts_before=$(kstaled_query "$kstaled_counters")
before=$(domain_qemu_pid "$domain")
virsh_ save "$domain" "$save" >/dev/null
virsh_ restore "$save" >/dev/null
restored_ms=$(date +%s%3N)
after=$(domain_qemu_pid "$domain")
[ "$before" != "$after" ] || die "restore did not start a new QEMU"
settings=$(kstaled_query '{"scan-seconds", "stale-page-age"}')
echo "after restore (QEMU $before -> $after): $settings"
[ "$settings" = '{"scan-seconds":4,"stale-page-age":7}' ] ||
	die "virsh restore lost the settings: $settings"

# The restored device asked the guest for a fresh report (one more
# request generation) as soon as the VM ran, and it came within a second.
generation=$(($(jq '."request-generation"' <<<"$counts_before") + 1))
wait_for_query "(.\"report-request-generation\" // -1) >= $generation" 10 ||
	die "no fresh report after restore: $(kstaled_query)"
reply=$(kstaled_query)
latency=$(($(date +%s%3N) - $(jq '."report-age-ms"' <<<"$reply") - restored_ms))
counts_after=$(jq -c "$kstaled_counters" <<<"$reply")
echo "fresh report $latency ms after virsh restore returned;" \
	"counters $counts_before -> $counts_after"
[ "$latency" -lt 1000 ] || die "the fresh report came $latency ms after restore"
counters_carried "$counts_before" "$counts_after" ||
	die "counters went back over save / restore: $counts_before -> $counts_after"

# What the guest's administrator sets stands until the host changes that
# setting again: a request for a report changes none.  (The guest sets 30
# itself when the host sets 9.)
qmp '{"execute":"kstaled-set-config","arguments":{"scan-seconds":9}}' >/dev/null
guest_scan_seconds_becomes 9
guest_scan_seconds_becomes 30
generation=$(($(kstaled_query '."request-generation"') + 1))
qmp '{"execute":"kstaled-request-report"}' >/dev/null
wait_for_query "(.\"report-request-generation\" // -1) >= $generation" 10 ||
	die "no report for the request: $(kstaled_query)"
# The driver applies the configuration before it answers; the guest's
# loop prints a change within 0.1 s.
sleep 2
[ "$(grep -c '^QEMU-DEVICE-SCAN-SECONDS 9' "$console")" -eq 1 ] ||
	die "a request for a report put back the host's scan_seconds over the guest administrator's; console:
$(grep QEMU-DEVICE-SCAN "$console")"
echo "a request for a report left the guest administrator's scan_seconds 30 alone"
# The host changing it again wins.
qmp '{"execute":"kstaled-set-config","arguments":{"scan-seconds":2}}' >/dev/null
guest_scan_seconds_becomes 2
