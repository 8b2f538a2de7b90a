#!/bin/bash
# Through libvirt's QMP pass-through, query-kstaled returns the guest's
# idle page histograms: the record of cgroup /e2e for some scan S equals,
# field by field, the memory.idle_page_stats the guest printed for that
# same scan S.  The workload leaves about 40 MiB idle, so an all-zero
# record (or one the guest never computed) cannot match.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/qemu/lib-device.sh"

device_domain_start kstaled-qemu-report

buckets=(1 2 5 15 30 60 120 240)
deadline=$((SECONDS + 120))
while :; do
	[ $SECONDS -lt $deadline ] ||
		die "no report of /e2e matching a guest printout after 120 s; last: ${record:-none}"
	record=$(kstaled_query '.cgroups[] | select(.path == "/e2e")' 2>/dev/null) || record=
	if [ -n "$record" ]; then
		scans=$(jq -r .scans <<<"$record")
		line=$(grep -m1 -E "^QEMU-DEVICE-STATS .*scans $scans( |$)" "$console" || true)
		# Wait for a scan late enough that the idle memory is idle.
		[ -n "$line" ] && [ "$(jq '."idle-clean"[0] + ."idle-dirty-swap"[0]' <<<"$record")" -ge $((30 << 20)) ] && break
	fi
	sleep 0.5
done
echo "guest:  $line"
echo "device: $record"

# guest_stat KEY: the value of KEY in the guest's printout.
guest_stat() {
	awk -v k="$1" '{ for (i = 2; i < NF; i += 2) if ($i == k) { print $(i + 1); exit } }' <<<"$line"
}

compared=0
for i in "${!buckets[@]}"; do
	prefix=idle
	[ "${buckets[$i]}" = 1 ] || prefix=idle_${buckets[$i]}
	for kind in clean dirty_file dirty_swap; do
		want=$(guest_stat "${prefix}_$kind")
		[ -n "$want" ] || die "guest printout has no ${prefix}_$kind"
		got=$(jq -r --argjson i "$i" ".\"idle-${kind//_/-}\"[\$i]" <<<"$record")
		[ "$got" = "$want" ] ||
			die "${prefix}_$kind: device has $got, guest printed $want (scan $scans)"
		compared=$((compared + 1))
	done
done
echo "scan $scans: $compared histogram entries equal"
