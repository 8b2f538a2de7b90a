#!/bin/bash
# The guest kernel boots under a real QEMU, reports its version over the
# serial console, and its initramfs gives tests memory cgroups and memload.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

check_boot() {
	local kernel=$1 console
	console=$("$KSTALED_TOP/tests/run-guest.sh" --kernel "$kernel" boot-check) ||
		die "boot-check failed with $kernel:
$console"
	echo "$console" | grep -qE '^KSTALED-VM-BOOTED 6\.12\.' ||
		die "console of $kernel lacks 'KSTALED-VM-BOOTED 6.12.*':
$console"
	echo "$console" | grep -E '^(KSTALED-VM-BOOTED|boot-check|KSTALED-VM-EXIT)'
}

check_boot "$(guest_kernel)"
