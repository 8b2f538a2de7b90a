#!/bin/bash
# The QEMU series' own qtest of the kstaled device (tests/qtest/
# virtio-kstaled-test.c, built by scripts/build-qemu.sh beside the
# emulator): malformed reports into a live device, QMP, HMP, events.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

# build-qemu.sh is cached: this is the build that gave meson's emulator.
qemu=$("$KSTALED_TOP/scripts/build-qemu.sh")
QTEST_QEMU_BINARY=$qemu exec "${qemu%/*}/virtio-kstaled-test" --tap -k
