#!/bin/bash
# Fault test: the guest sends reports faster than the host reads them
# (scan-seconds 1 plus kstaled-request-report in a tight loop, query-kstaled
# only now and then), and QEMU's own memory stays bounded: its resident
# set outside guest RAM grows by less than 8 MiB between the end of a
# 10 s warm-up and the end of the run.  Prints the request and report
# rates and the RSS samples.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/qemu/lib-device.sh"

warmup=10
run=40
limit_kib=$((8 * 1024))
guest_mib=512

export KSTALED_SCAN_SECONDS=1
device_domain_start kstaled-qemu-rss
pid=$(domain_qemu_pid "$domain")
wait_for_query '.reports >= 2' 60 || die "no reports: $(kstaled_query)"

# qemu_own_rss_kib: resident KiB of QEMU's mappings other than guest RAM,
# which the guest itself fills.
qemu_own_rss_kib() {
	local rss
	rss=$(qemu_rss_kib "$pid" $guest_mib) || die "cannot read QEMU's memory"
	echo "${rss#* }"
}

start=$SECONDS
reports0=$(kstaled_query .reports)
requests=0
baseline=
samples=()
next_sample=$SECONDS
while [ $((SECONDS - start)) -lt "$run" ]; do
	qmp '{"execute":"kstaled-request-report"}' >/dev/null
	requests=$((requests + 1))
	if [ $SECONDS -ge "$next_sample" ]; then
		rss=$(qemu_own_rss_kib)
		samples+=("$rss")
		[ -n "$baseline" ] || [ $((SECONDS - start)) -lt "$warmup" ] || baseline=$rss
		next_sample=$((SECONDS + 5))
	fi
done
final=$(qemu_own_rss_kib)
info=$(kstaled_query '{reports, "dropped-reports"}')
reports=$(($(jq .reports <<<"$info") - reports0))
elapsed=$((SECONDS - start))
echo "requests: $requests in $elapsed s ($((requests / elapsed))/s), reports: $reports ($((reports / elapsed))/s), $info"
echo "QEMU RSS outside guest RAM (KiB), every 5 s: ${samples[*]} final $final"
[ "$(jq '."dropped-reports"' <<<"$info")" = 0 ] || die "the guest's reports were dropped: $info"
[ "$reports" -gt "$elapsed" ] || die "only $reports reports in $elapsed s: the guest did not flood the device"
[ $((final - baseline)) -lt "$limit_kib" ] ||
	die "QEMU grew by $((final - baseline)) KiB after the warm-up (limit $limit_kib)"
echo "growth after warm-up: $((final - baseline)) KiB (limit $limit_kib)"
