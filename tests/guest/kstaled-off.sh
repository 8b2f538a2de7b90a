#!/bin/sh
# kstaled-off: booted with kstaled=off, the kernel allocates no page_ext
# for kstaled and says so, and kstaled is not there to turn on.
. /guest/lib-kstaled.sh
dmesg | grep "kstaled: off: booted with kstaled=off" ||
	fail "no 'kstaled: off' line in dmesg"
[ ! -e /sys/kernel/mm/kstaled ] || fail "/sys/kernel/mm/kstaled exists with kstaled=off"
if dmesg | grep "bytes of page_ext"; then
	fail "page_ext was allocated although kstaled, its only user here, is off"
fi
echo "kstaled is off"
