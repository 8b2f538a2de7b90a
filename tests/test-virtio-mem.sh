#!/bin/bash
# Memory hotplug through virtio-mem keeps kstaled's ages: the guest
# (tests/guest/virtio-mem.sh) asks on its console for 256 MiB to be
# plugged, then unplugged, and checks that an idle region kept its age
# across both; this script resizes the guest's virtio-mem device over QMP
# when asked.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-guest-qmp.sh"

start_guest virtio-mem --mem 512,maxmem=1G \
	--append memhp_default_state=online_movable \
	--qemu-arg -object --qemu-arg memory-backend-ram,id=vmem0-ram,size=256M \
	--qemu-arg -device --qemu-arg virtio-mem-pci,id=vmem0,memdev=vmem0-ram,requested-size=0
for step in plug:268435456 unplug:0; do
	wait_for_guest "^VIRTIO-MEM-${step%%:*}" 300
	guest_qmp "{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"vmem0\",\"property\":\"requested-size\",\"value\":${step#*:}}}" >/dev/null
	echo "requested-size ${step#*:} (${step%%:*})"
done
finish_guest
grep -E '^(virtio-mem |idle_5 after)' "$scratch/console"
