#!/bin/bash
# redis-server in the Debian guest holds 200 MiB of values, of which a
# reader touches only the first 1000 keys (about 4 MiB) every second.
# After 40 scans kstaled's idle memory of redis-server.service (idle for at
# least 15 scans, all kinds) is within 5 % of guest memory of what that
# implies: the data set redis reports, less the part the reader touches.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/lib-debian.sh"

dom=kstaled-debian-redis
mem_mib=1024 keys=51200 value_bytes=4096 hot_keys=1000 min_scans_index=3 wait_scans=40
trap 'debian_destroy $dom; libvirt_stop' EXIT
libvirt_start
debian_boot "$dom" $mem_mib >/dev/null

# 51200 values of 4 KiB: 200 MiB.
dataset=$(redis_populate "$dom" $keys $value_bytes)
redis_start_reader "$dom" $hot_keys
[ "$dataset" -ge $((keys * value_bytes)) ] ||
	die "redis holds $dataset B, less than the $((keys * value_bytes)) B populated"
expected=$((dataset - dataset * hot_keys / keys))
echo "redis data set $((dataset >> 20)) MiB, $hot_keys of $keys keys read every second: $((expected >> 20)) MiB should be idle"

cgroup_json() {
	virsh_ qemu-monitor-command "$dom" '{"execute":"query-kstaled"}' |
		jq -c '.return | {scans: ."guest-scans"} + (.cgroups[] | select(.path == "/system.slice/redis-server.service"))'
}
start_scans=$(cgroup_json | jq '.scans')
deadline=$((SECONDS + wait_scans * 4))
until [ "$(cgroup_json | jq '.scans')" -ge $((start_scans + wait_scans)) ]; do
	[ $SECONDS -lt $deadline ] || die "the guest did not scan $wait_scans times in $((wait_scans * 4)) s"
	sleep 2
done
cg=$(cgroup_json)
idle=$(jq --argjson i $min_scans_index '."idle-clean"[$i] + ."idle-dirty-file"[$i] + ."idle-dirty-swap"[$i]' <<<"$cg")
usage=$(jq '."memory-usage"' <<<"$cg")
tolerance=$((mem_mib * 1024 * 1024 * 5 / 100))
diff=$((idle - expected))
echo "after $wait_scans scans: redis-server.service uses $((usage >> 20)) MiB, kstaled reports $((idle >> 20)) MiB idle for >= 15 scans; expected $((expected >> 20)) MiB, off by $((diff >> 20)) MiB ($((diff * 10000 / (mem_mib * 1024 * 1024))) / 10000 of guest memory)"
[ "${diff#-}" -le "$tolerance" ] ||
	die "kstaled's idle memory for redis is $diff B off, beyond 5 % of guest memory ($tolerance B)"
[ "$(guest_sh "$dom" 'systemctl is-active redis-reader')" = active ] || die "the reader stopped"
