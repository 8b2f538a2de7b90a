#!/bin/bash
# libvirt runs the guest with the self-built QEMU as <emulator>: the QMP
# pass-through answers, and the virtio balloon follows "virsh setmem".
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"

domain=kstaled-test-domain
trap 'domain_destroy $domain; libvirt_stop' EXIT
libvirt_start

console=$(domain_start "$domain" 512 "")
wait_for_file_line "$console" '^KSTALED-VM-READY' 120 ||
	die "guest did not boot under libvirt; console:
$(cat "$console")"
grep -E '^KSTALED-VM-BOOTED' "$console"

# The process libvirt started is our QEMU, not a system one.
pid=$(cat "/run/libvirt/qemu/$domain.pid")
exe=$(readlink "/proc/$pid/exe")
[ "$exe" = "$(readlink -f "$(guest_qemu)")" ] ||
	die "domain runs $exe, expected $(guest_qemu)"
echo "emulator: $exe"

version=$(virsh_ qemu-monitor-command "$domain" '{"execute":"query-version"}')
echo "query-version: $version"
echo "$version" | jq -e '.return.qemu == {"major": 10, "minor": 0, "micro": 2}' >/dev/null ||
	die "query-version did not report QEMU 10.0.2: $version"

before=$(domain_kib "$domain" actual)
[ "$before" -eq $((512 * 1024)) ] || die "balloon starts at $before KiB, expected 524288"
virsh_ setmem "$domain" 256M --live
deadline=$((SECONDS + 60))
while [ "$(domain_kib "$domain" actual)" -ne $((256 * 1024)) ]; do
	[ $SECONDS -lt $deadline ] ||
		die "balloon stuck at $(domain_kib "$domain" actual) KiB after setmem 256M"
	sleep 0.5
done
# The guest itself saw the memory go: the memory its balloon driver
# reports (MemTotal, updated every stats period) drops below what it owns.
deadline=$((SECONDS + 30))
while :; do
	available=$(domain_kib "$domain" available)
	[ -n "$available" ] && [ "$available" -lt $((256 * 1024)) ] && break
	[ $SECONDS -lt $deadline ] ||
		die "guest reports available=${available:-none} KiB, expected under 262144"
	sleep 0.5
done
virsh_ dommemstat "$domain"
echo "balloon: $before KiB -> $((256 * 1024)) KiB, guest MemTotal $available KiB"
