#!/bin/bash
# The virtio_kstaled module, loaded late instead of at boot
# (kstaled_vm.driver=manual), binds to the device, applies the host's
# scan-seconds and reports; after rmmod the guest sends nothing; loaded
# again, it reports again.  QEMU's trace of accepted reports is matched
# against the scan counts the guest prints (tests/guest/driver-module.sh).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

scratch=$(mktemp -d /var/tmp/kstaled-driver-module.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

if ! "$KSTALED_TOP/tests/run-guest.sh" --append kstaled_vm.driver=manual \
	--qemu-arg -device --qemu-arg virtio-kstaled-pci,scan-seconds=1 \
	--qemu-arg -trace --qemu-arg 'virtio_kstaled_*' \
	driver-module >"$scratch/console.raw" 2>"$scratch/stderr"; then
	cat "$scratch/console.raw" "$scratch/stderr"
	die "driver-module failed in the guest"
fi
# The serial console ends its lines with CR LF.
tr -d '\r' <"$scratch/console.raw" >"$scratch/console"
grep '^driver-module:' "$scratch/console"

step_scan() {
	sed -n "s/^driver-module: $1 at scan \([0-9]*\)$/\1/p" "$scratch/console"
}
loaded=$(step_scan loaded) removed=$(step_scan removed) reloaded=$(step_scan reloaded)
[ -n "$loaded" ] && [ -n "$removed" ] && [ -n "$reloaded" ] ||
	die "the guest did not print every step: $(grep '^driver-module:' "$scratch/console")"
# QEMU's log backend: "[PID@TIME:]virtio_kstaled_report accepted report: ... guest_scans N, ..."
report_scans=$(sed -nE 's/.*virtio_kstaled_report accepted report: .* guest_scans ([0-9]+),.*/\1/p' \
	"$scratch/stderr")
if grep 'virtio_kstaled_drop' "$scratch/stderr"; then
	die "QEMU dropped a report from the driver"
fi
count_between() { # LOW HIGH: reports with LOW < guest_scans < HIGH
	awk -v lo="$1" -v hi="$2" '$1 > lo && $1 < hi { n++ } END { print n + 0 }' <<<"$report_scans"
}
echo "reports: $(echo "$report_scans" | grep -c .), guest scans $(echo $report_scans)"
[ "$(count_between 0 $((loaded + 1)))" -ge 2 ] ||
	die "fewer than 2 reports from the first load (scans up to $loaded)"
# One scan may end between the guest's print and its rmmod.
[ "$(count_between $((loaded + 1)) "$removed")" -eq 0 ] ||
	die "reports for scans $((loaded + 2)) to $((removed - 1)), while the module was out"
[ "$(count_between "$removed" $((reloaded + 1)))" -ge 2 ] ||
	die "fewer than 2 reports after the reload (scans $removed to $reloaded)"
