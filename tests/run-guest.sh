#!/bin/bash
# run-guest.sh [options] NAME
# Boot the guest kernel and initramfs under a real QEMU, run the in-guest
# script tests/guest/NAME.sh (via kstaled_vm.run=NAME) and exit with its
# exit code.  The console goes to stdout.
#
#   --mem MiB          guest memory (default 512)
#   --smp N            vCPUs (default 1)
#   --append ARGS      extra kernel command line
#   --qemu-arg ARG     extra QEMU argument (repeatable)
#   --timeout SECONDS  give up after this long (default 300)
#   --kernel FILE      bzImage (default $KSTALED_KERNEL)
#
# Environment: KSTALED_QEMU, KSTALED_KERNEL, KSTALED_INITRAMFS (set by
# meson for tests); KSTALED_ACCEL=tcg (default) or kvm.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

mem=512 smp=1 append= timeout=300 kernel=${KSTALED_KERNEL:-}
qemu_args=()
while [ $# -gt 1 ]; do
	case "$1" in
	--mem) mem=$2 ;;
	--smp) smp=$2 ;;
	--append) append=$2 ;;
	--qemu-arg) qemu_args+=("$2") ;;
	--timeout) timeout=$2 ;;
	--kernel) kernel=$2 ;;
	*) die "unknown option '$1'" ;;
	esac
	shift 2
done
[ $# -eq 1 ] || die "usage: run-guest.sh [options] NAME"
name=$1

qemu=$(guest_qemu)
initramfs=$(guest_initramfs)
[ -n "$kernel" ] || kernel=$(guest_kernel)
[ -f "$kernel" ] || die "kernel $kernel does not exist"
accel=$(guest_accel_args)
read -r -a accel_args <<<"$accel"

log_file=$(mktemp)
trap 'rm -f "$log_file"' EXIT
set +e
timeout --foreground "$timeout" "$qemu" "${accel_args[@]}" -M q35 -m "$mem" -smp "$smp" \
	-nodefaults -display none -no-reboot -serial stdio \
	-kernel "$kernel" -initrd "$initramfs" \
	-append "console=ttyS0 panic=-1 kunit.enable=0 kstaled_vm.run=$name $append" \
	"${qemu_args[@]}" </dev/null | tee "$log_file"
status=("${PIPESTATUS[@]}")
set -e
[ "${status[0]}" -eq 124 ] && die "guest '$name' did not finish within $timeout s"
[ "${status[0]}" -eq 0 ] || die "QEMU exited with status ${status[0]}"
rc=$(sed -n 's/^KSTALED-VM-EXIT \([0-9]*\).*/\1/p' "$log_file" | tail -n 1)
[ -n "$rc" ] || die "guest '$name' powered off without reporting an exit status"
exit "$rc"
