#!/bin/bash
# When the guest's memory cgroups do not fit in one report, the
# virtio_kstaled driver sends the ones with the largest memory usage
# (docs/virtio-kstaled.md), not the first ones in walk order.  The guest
# (tests/guest/driver-truncation.sh) has 1501 cgroups, the only large one
# last in walk order; query-kstaled must show it among 1024 records.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"   # wait_for_file_line

scratch=$(mktemp -d /var/tmp/kstaled-driver-truncation.XXXXXX)
guest_pid=
cleanup() {
	[ -z "$guest_pid" ] || kill "$guest_pid" 2>/dev/null || true
	rm -rf "$scratch"
}
trap cleanup EXIT

# qmp COMMAND: run one QMP command (JSON) on the guest's QEMU, print its
# return value.
qmp() {
	/usr/bin/python3 - "$scratch/qmp" "$1" <<'PY'
import json, socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
stream = sock.makefile('rw')
def execute(command):
    stream.write(json.dumps(command) + '\n')
    stream.flush()
    while True:
        reply = json.loads(stream.readline())
        if 'return' in reply or 'error' in reply:
            return reply
json.loads(stream.readline())   # the greeting
execute({'execute': 'qmp_capabilities'})
reply = execute(json.loads(sys.argv[2]))
if 'error' in reply:
    sys.exit('QMP error: ' + reply['error']['desc'])
print(json.dumps(reply['return']))
PY
}

"$KSTALED_TOP/tests/run-guest.sh" \
	--qemu-arg -device --qemu-arg virtio-kstaled-pci,scan-seconds=1 \
	--qemu-arg -qmp --qemu-arg "unix:$scratch/qmp,server=on,wait=off" \
	driver-truncation >"$scratch/console" 2>&1 &
guest_pid=$!
if ! wait_for_file_line "$scratch/console" '^DRIVER-TRUNCATION-READY' 400; then
	cat "$scratch/console"
	die "the guest did not create its cgroups"
fi
grep '^DRIVER-TRUNCATION-READY' "$scratch/console"
info=$(qmp '{"execute":"query-kstaled"}')
records=$(jq '.cgroups | length' <<<"$info")
echo "report: $records records; largest: $(jq -c '[.cgroups[] |
	{path, usage: ."memory-usage"}] | sort_by(-.usage) | .[:3]' <<<"$info")"
[ "$records" -eq 1024 ] || die "the report has $records records, not 1024"
jq -e '.cgroups | any(.path == "/large")' <<<"$info" >/dev/null ||
	die "the report lacks /large, the cgroup with the largest usage after the root"
jq -e '.cgroups | any(.path == "/")' <<<"$info" >/dev/null ||
	die "the report lacks the root cgroup"

qmp '{"execute":"kstaled-set-config","arguments":{"scan-seconds":2}}' >/dev/null
status=0
wait "$guest_pid" || status=$?
guest_pid=
[ "$status" -eq 0 ] || { cat "$scratch/console"; die "the guest failed (status $status)"; }
