#!/bin/bash
# A sharp stale drop in the guest raises KSTALED_EARLY_REPORT within 1 s,
# and the event reaches the QMP client (libvirt, then virsh) within 1 s of
# QEMU raising it.
#
# Timing, all on the host clock: the host asks for the drop by changing
# stale-page-age (3 -> 2, which by itself only makes more memory stale);
# the guest workload (tests/guest/qemu-device.sh) then signals the memload
# holding 32 MiB of stale file pages to touch them all and prints
# QEMU-DEVICE-TOUCHED.  "touched" is when that line shows in the console
# log, which QEMU writes as the guest prints; "raised" is the event's own
# QMP timestamp; "seen" is when virsh's output shows the event.  Both
# files are polled every 20 ms, so each figure is good to about 20 ms.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/qemu/lib-device.sh"

export KSTALED_SCAN_SECONDS=1 KSTALED_STALE_PAGE_AGE=3
device_domain_start kstaled-qemu-early
events=$(mktemp /var/tmp/kstaled-events.XXXXXX)
watcher=
trap '[ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true; rm -f "$events"
	domain_destroy $domain; libvirt_stop' EXIT

wait_for_query '.cgroups[] | select(.path == "/e2e" and .stale >= (24 * 1048576))' 120 ||
	die "cgroup /e2e never had 24 MiB stale: $(kstaled_query)"
kstaled_query '.cgroups[] | select(.path == "/e2e") | {scans, stale}'

virsh_ qemu-monitor-event "$domain" --event KSTALED_EARLY_REPORT \
	--timeout 60 >"$events" &
watcher=$!
sleep 1

t0=$(date +%s.%N)
qmp '{"execute":"kstaled-set-config","arguments":{"stale-page-age":2}}' >/dev/null
touched=
while ! grep -q '^event KSTALED_EARLY_REPORT at ' "$events"; do
	kill -0 "$watcher" 2>/dev/null ||
		die "no KSTALED_EARLY_REPORT within 60 s; guest: $(grep -c QEMU-DEVICE-TOUCHED "$console") touches"
	[ -n "$touched" ] || ! grep -q '^QEMU-DEVICE-TOUCHED' "$console" || touched=$(date +%s.%N)
	sleep 0.02
done
seen=$(date +%s.%N)
[ -n "$touched" ] || die "KSTALED_EARLY_REPORT came before the guest touched its memory"
# "event NAME at SECONDS.MICROSECONDS for domain 'D': DATA"
line=$(grep -m1 '^event KSTALED_EARLY_REPORT at ' "$events")
echo "$line"
raised=$(sed -E 's/^event [A-Z_]+ at ([0-9.]+) .*/\1/' <<<"$line")
event=${line#*\': }
jq -e '."stale-drop" >= (16 * 1048576) and
	."qom-path" == "/machine/peripheral/kstaled0/virtio-backend"' <<<"$event" >/dev/null ||
	die "unexpected event data: $event"

request_to_touched=$(echo "$touched - $t0" | bc)
touched_to_raised=$(echo "$raised - $touched" | bc)
raised_to_seen=$(echo "$seen - $raised" | bc)
echo "host request to guest touch: $request_to_touched s, touch to event raised: $touched_to_raised s, raised to seen by virsh: $raised_to_seen s"
[ "$(echo "$touched_to_raised <= 1.0" | bc)" = 1 ] ||
	die "the event came $touched_to_raised s after the guest's touch (limit 1 s)"
[ "$(echo "$raised_to_seen <= 1.0" | bc)" = 1 ] ||
	die "event delivered $raised_to_seen s after QEMU raised it (limit 1 s)"
