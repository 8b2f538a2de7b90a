# Helpers for the tests of the kstaled device with a guest; sourced after
# scripts/lib.sh and tests/lib-libvirt.sh.  The guest runs
# tests/guest/qemu-device.sh.
# shellcheck shell=bash

# device_domain_start NAME: start domain NAME (512 MiB, the kstaled
# device with KSTALED_SCAN_SECONDS / KSTALED_STALE_PAGE_AGE) running the
# qemu-device workload, and wait for its first statistics line.  Sets
# domain and console; the domain and any libvirtd started here go at exit.
device_domain_start() {
	domain=$1
	trap 'domain_destroy $domain; libvirt_stop' EXIT
	libvirt_start
	console=$(domain_start "$domain" 512 "kstaled_vm.run=qemu-device")
	wait_for_file_line "$console" '^QEMU-DEVICE-STATS' 180 ||
		die "guest workload did not start; console:
$(tail -n 40 "$console")"
}

# qmp JSON: run a QMP command in the domain, print the reply.
qmp() {
	virsh_ qemu-monitor-command "$domain" "$1"
}

# kstaled_query [JQ_FILTER]: query-kstaled's return value, through JQ_FILTER.
kstaled_query() {
	qmp '{"execute":"query-kstaled"}' | jq -ce ".return${1:+ | $1}"
}

# wait_for_query JQ_CONDITION SECONDS: wait until query-kstaled's return
# value satisfies JQ_CONDITION.
wait_for_query() {
	local deadline=$((SECONDS + $2))
	while [ $SECONDS -lt "$deadline" ]; do
		kstaled_query "$1" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}

# The device's counters as query-kstaled names them: a jq filter.
# shellcheck disable=SC2034 # used by the scripts that source this file
kstaled_counters='{reports, "dropped-reports", "deferred-reports", "report-bytes", "request-generation"}'

# counters_carried BEFORE AFTER: true if AFTER (kstaled_counters after a
# migration or a restore) lost none of BEFORE, and shows the one request
# the device makes when the VM runs again and the report it brought.
counters_carried() {
	jq -e --argjson b "$1" '
		.reports > $b.reports and
		."dropped-reports" >= $b."dropped-reports" and
		."deferred-reports" >= $b."deferred-reports" and
		."report-bytes" > $b."report-bytes" and
		."request-generation" == $b."request-generation" + 1' <<<"$2" >/dev/null
}
