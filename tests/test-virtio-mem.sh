#!/bin/bash
# Memory hotplug through virtio-mem keeps kstaled's ages: the guest
# (tests/guest/virtio-mem.sh) asks on its console for 256 MiB to be
# plugged, then unplugged, and checks that an idle region kept its age
# across both; this script resizes the guest's virtio-mem device over QMP
# when asked.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

scratch=$(mktemp -d /var/tmp/kstaled-virtio-mem.XXXXXX)
guest_pid=
cleanup() {
	[ -z "$guest_pid" ] || kill "$guest_pid" 2>/dev/null || true
	rm -rf "$scratch"
}
trap cleanup EXIT

"$KSTALED_TOP/tests/run-guest.sh" --mem 512,maxmem=1G \
	--append memhp_default_state=online_movable \
	--qemu-arg -object --qemu-arg memory-backend-ram,id=vmem0-ram,size=256M \
	--qemu-arg -device --qemu-arg virtio-mem-pci,id=vmem0,memdev=vmem0-ram,requested-size=0 \
	--qemu-arg -qmp --qemu-arg "unix:$scratch/qmp,server=on,wait=off" \
	virtio-mem >"$scratch/console" 2>&1 &
guest_pid=$!

# wait_for_guest PATTERN: wait until the console has a line matching the
# extended regex PATTERN; fail when the guest ends first or after 300 s.
wait_for_guest() {
	local deadline=$((SECONDS + 300))
	until grep -qE "$1" "$scratch/console"; do
		kill -0 "$guest_pid" 2>/dev/null && [ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
}

for step in plug:268435456 unplug:0; do
	if ! wait_for_guest "^VIRTIO-MEM-${step%%:*}"; then
		cat "$scratch/console"
		die "the guest did not ask to ${step%%:*}"
	fi
	/usr/bin/python3 "$KSTALED_TOP/tests/qemu/qmp.py" "$scratch/qmp" \
		"{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"vmem0\",\"property\":\"requested-size\",\"value\":${step#*:}}}" >/dev/null
	echo "requested-size ${step#*:} (${step%%:*})"
done

status=0
wait "$guest_pid" || status=$?
guest_pid=
grep -E '^(virtio-mem |idle_5 after|FAIL)' "$scratch/console" || true
[ "$status" -eq 0 ] || { cat "$scratch/console"; die "the guest failed (status $status)"; }
