#!/bin/bash
# When the guest's memory cgroups do not fit in one report, the
# virtio_kstaled driver sends the ones with the largest memory usage
# (docs/virtio-kstaled.md), not the first ones in walk order.  The guest
# (tests/guest/driver-truncation.sh) has 1501 cgroups, the only large one
# last in walk order; query-kstaled must show it among 1024 records.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-guest-qmp.sh"

start_guest driver-truncation \
	--qemu-arg -device --qemu-arg virtio-kstaled-pci,scan-seconds=1
wait_for_guest '^DRIVER-TRUNCATION-READY' 400
grep '^DRIVER-TRUNCATION-READY' "$scratch/console"
info=$(guest_qmp '{"execute":"query-kstaled"}')
records=$(jq '.cgroups | length' <<<"$info")
echo "report: $records records; largest: $(jq -c '[.cgroups[] |
	{path, usage: ."memory-usage"}] | sort_by(-.usage) | .[:3]' <<<"$info")"
[ "$records" -eq 1024 ] || die "the report has $records records, not 1024"
jq -e '.cgroups | any(.path == "/large")' <<<"$info" >/dev/null ||
	die "the report lacks /large, the cgroup with the largest usage after the root"
jq -e '.cgroups | any(.path == "/")' <<<"$info" >/dev/null ||
	die "the report lacks the root cgroup"

guest_qmp '{"execute":"kstaled-set-config","arguments":{"scan-seconds":2}}' >/dev/null
finish_guest
