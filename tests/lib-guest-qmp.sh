# Helpers for host-side tests that boot the guest in the background with a
# QMP socket and drive its QEMU while the in-guest script runs; sourced
# after scripts/lib.sh, never run.  Sets scratch, a directory removed on
# exit with the guest killed.
# shellcheck shell=bash

scratch=$(mktemp -d "/var/tmp/kstaled-$(basename "$0" .sh).XXXXXX")
guest_pid=
_guest_qmp_cleanup() {
	[ -z "$guest_pid" ] || kill "$guest_pid" 2>/dev/null || true
	rm -rf "$scratch"
}
trap _guest_qmp_cleanup EXIT

# start_guest NAME [RUN_GUEST_ARG...]: boot the guest running
# tests/guest/NAME.sh in the background, its console in $scratch/console
# and a QMP socket at $scratch/qmp.
start_guest() {
	local name=$1
	shift
	"$KSTALED_TOP/tests/run-guest.sh" "$@" \
		--qemu-arg -qmp --qemu-arg "unix:$scratch/qmp,server=on,wait=off" \
		"$name" >"$scratch/console" 2>&1 &
	guest_pid=$!
}

# guest_qmp JSON: run one QMP command on the guest's QEMU, print its
# return value (tests/qemu/qmp.py).
guest_qmp() {
	/usr/bin/python3 "$KSTALED_TOP/tests/qemu/qmp.py" "$scratch/qmp" "$1"
}

# wait_for_guest PATTERN SECONDS: wait until the console has a line
# matching the extended regex PATTERN; on timeout, or when the guest
# ends first, print the console and die.
wait_for_guest() {
	local deadline=$((SECONDS + $2))
	until grep -qE "$1" "$scratch/console" 2>/dev/null; do
		if ! kill -0 "$guest_pid" 2>/dev/null || [ $SECONDS -ge "$deadline" ]; then
			cat "$scratch/console"
			die "no console line matching '$1' from the guest"
		fi
		sleep 0.2
	done
}

# finish_guest: wait for the guest to power off; print the console and die
# unless its script succeeded.
finish_guest() {
	local status=0
	wait "$guest_pid" || status=$?
	guest_pid=
	[ "$status" -eq 0 ] || { cat "$scratch/console"; die "the guest failed (status $status)"; }
}
