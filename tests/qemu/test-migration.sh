#!/bin/bash
# Live migration of a guest running the kstaled driver, between two local
# QEMU processes over a unix socket.  The report itself is not migrated:
# the destination must ask the guest for a fresh one as soon as the VM
# runs, and the report must be there within a second of the migration's
# end.  The counters carry over and never go back.  A destination whose
# max-report-size is smaller than the source's (the guest read it once)
# must refuse the migration, and the source must keep running.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/qemu/lib-device.sh"

qemu=$(guest_qemu)
kernel=$(guest_kernel)
initramfs=$(guest_initramfs)
read -r -a accel_args <<<"$(guest_accel_args)"

dir=$(mktemp -d)
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	wait
	rm -rf "$dir"
}
trap cleanup EXIT

# start_qemu NAME [QEMU_ARG...]: boot the guest with the qemu-device
# workload in a QEMU whose QMP sockets are $dir/NAME.qmp, for commands,
# and $dir/NAME.events, for a client waiting for an event.  A 10 s scan period
# keeps the guest's scheduled reports from passing for the requested one.
# The return path lets a source learn that its destination refused the
# device state, and keep running.
start_qemu() {
	local name=$1
	shift
	"$qemu" "${accel_args[@]}" -M q35 -m 512 -nodefaults -display none \
		-no-reboot -serial "file:$dir/$name.console" \
		-kernel "$kernel" -initrd "$initramfs" \
		-append "console=ttyS0 panic=-1 kunit.enable=0 kstaled_vm.run=qemu-device" \
		-qmp "unix:$dir/$name.qmp,server=on,wait=off" \
		-qmp "unix:$dir/$name.events,server=on,wait=off" \
		-device virtio-kstaled-pci,id=kstaled0,scan-seconds=10 \
		-global migration.x-return-path=on \
		"$@" 2>"$dir/$name.stderr" &
	pids+=($!)
	for _ in $(seq 100); do
		[ -S "$dir/$name.qmp" ] && return
		sleep 0.1
	done
	die "QEMU $name did not start: $(cat "$dir/$name.stderr")"
}

# qmp_in NAME JSON: the "return" value of a QMP command in QEMU NAME, as
# JSON (lib-device.sh's qmp goes through libvirt).
qmp_in() {
	/usr/bin/python3 "$KSTALED_TOP/tests/qemu/qmp.py" "$dir/$1.qmp" "$2"
}

# kstaled NAME JQ_FILTER: query-kstaled's reply in QEMU NAME, filtered.
kstaled() {
	qmp_in "$1" '{"execute":"query-kstaled","arguments":{"top":0}}' | jq -c "$2"
}

now_ms() {
	date +%s%3N
}

# migrate FROM TO: migrate QEMU FROM to QEMU TO (started with -incoming);
# prints the final status.
migrate() {
	local status deadline=$((SECONDS + 120))
	# QEMU opens its QMP sockets before the -incoming one: migrating
	# before that fails at once, with nothing on the destination's stderr.
	until [ -S "$dir/$2.migrate" ]; do
		[ $SECONDS -lt $deadline ] || die "QEMU $2 never listened on $dir/$2.migrate"
		sleep 0.05
	done
	qmp_in "$1" "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"unix:$dir/$2.migrate\"}}" >/dev/null
	while [ $SECONDS -lt $deadline ]; do
		status=$(qmp_in "$1" '{"execute":"query-migrate"}' | jq -r .status)
		case "$status" in
		completed | failed | cancelled) echo "$status"; return ;;
		esac
		sleep 0.05
	done
	die "migration $1 -> $2 did not end within 120 s"
}

start_qemu src
wait_for_file_line "$dir/src.console" '^QEMU-DEVICE-STATS' 180 ||
	die "guest workload did not start; console: $(tail -n 30 "$dir/src.console")"
qmp_in src '{"execute":"kstaled-request-report"}' >/dev/null
deadline=$((SECONDS + 30))
until kstaled src '."report-request-generation" == ."request-generation"' | grep -q true; do
	[ $SECONDS -lt $deadline ] || die "no report from the source guest: $(kstaled src .)"
	sleep 0.2
done

before=$(kstaled src "$kstaled_counters")
echo "source before migration: $before"

start_qemu dst -incoming "unix:$dir/dst.migrate"
/usr/bin/python3 "$KSTALED_TOP/tests/qemu/qmp.py" "$dir/dst.events" --event RESUME \
	>"$dir/dst.resume" &
resume_waiter=$!
pids+=("$resume_waiter")
status=$(migrate src dst)
[ "$status" = completed ] || die "migration failed: $(cat "$dir/dst.stderr")"
wait "$resume_waiter" || die "no RESUME event on the destination"
resume_ms=$(cat "$dir/dst.resume")

# The destination's request is the source's generation plus one; the
# guest's answer carries it.
generation=$(($(jq .\"request-generation\" <<<"$before") + 1))
deadline=$((SECONDS + 10))
until reply=$(kstaled dst .) &&
	[ "$(jq ."\"report-request-generation\"" <<<"$reply")" = "$generation" ]; do
	[ $SECONDS -lt $deadline ] || die "no fresh report on the destination: $(kstaled dst .)"
	sleep 0.02
done
arrived_ms=$(($(now_ms) - $(jq ."\"report-age-ms\"" <<<"$reply")))
latency=$((arrived_ms - resume_ms))
after=$(jq -c "$kstaled_counters" <<<"$reply")
echo "destination after migration: $after"
echo "fresh report $latency ms after the destination resumed" \
	"(requested: $(jq .requested <<<"$reply"))"
[ "$latency" -lt 1000 ] || die "the fresh report came $latency ms after the VM resumed"

counters_carried "$before" "$after" ||
	die "counters went back: before $before, after $after"

# A destination that accepts smaller reports than the guest was told.
start_qemu small -incoming "unix:$dir/small.migrate" \
	-global virtio-kstaled-device.max-report-size=4096
status=$(migrate dst small)
[ "$status" = failed ] || die "migration to a smaller max-report-size: $status"
grep -q "max-report-size" "$dir/small.stderr" ||
	die "the destination did not say why: $(cat "$dir/small.stderr")"
echo "refused: $(grep max-report-size "$dir/small.stderr")"
[ "$(qmp_in dst '{"execute":"query-status"}' | jq -r .status)" = running ] ||
	die "the source did not keep running after the refused migration"
reports=$(kstaled dst .reports)
qmp_in dst '{"execute":"kstaled-request-report"}' >/dev/null
deadline=$((SECONDS + 30))
until [ "$(kstaled dst .reports)" -gt "$reports" ]; do
	[ $SECONDS -lt $deadline ] || die "the guest stopped reporting after the refused migration"
	sleep 0.2
done
echo "the guest still reports after the refused migration"
