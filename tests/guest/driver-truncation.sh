#!/bin/sh
# driver-truncation: the guest side of tests/test-driver-truncation.sh.
# 1501 memory cgroups (the root, 1499 empty ones, then "large", which
# holds 32 MiB and comes last in the walk order) are more than a report
# holds (1024 records): the driver must send those with the largest usage.
# Prints DRIVER-TRUNCATION-READY once two reports followed, then waits for
# the host to set scan-seconds to 2 through the device.
. /guest/lib-kstaled.sh
root=/sys/fs/cgroup
i=1
while [ $i -le 1499 ]; do
	mkdir $root/small-$i || fail "cannot create cgroup small-$i"
	i=$((i + 1))
done
memload_start /tmp/memload.log --cgroup $root/large --size 32 --hot 0
kstaled_wait_scans $root 2
echo "DRIVER-TRUNCATION-READY cgroups $(find $root -name memory.current | wc -l)"
wait_scan_seconds 2 120
