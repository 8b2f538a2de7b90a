# Helpers for tests and the demo that boot the Debian 12 guest image under
# libvirt and run commands in it through the QEMU guest agent; sourced
# after scripts/lib.sh and tests/lib-libvirt.sh.
# shellcheck shell=bash

# debian_image: the cached disk image (meson passes KSTALED_DEBIAN_IMAGE;
# a plain shell user gets it from the build script, cached, so cheap).
debian_image() {
	local image=${KSTALED_DEBIAN_IMAGE:-}
	[ -n "$image" ] || image=$("$KSTALED_TOP/scripts/build-debian-image.sh")
	image=$(readlink -f "$image")
	[ -f "$image" ] || die "Debian image $image does not exist"
	echo "$image"
}

# debian_start [--without-kstaled] NAME MEMORY_MIB [VCPUS]: start a
# transient domain from docs/kstaled-debian-domain.xml (fill_domain) on a
# fresh copy-on-write overlay of the image, so every boot starts from the
# same disk; the console log path is printed.  KSTALED_DEBIAN_SWAP_MIB
# adds a second virtio-blk disk of that size (vdb, raw, for swap), and
# KSTALED_DEBIAN_DISK_CACHE sets both disks' host cache mode (none: the
# host's page cache holds none of the guest's disk).
debian_start() {
	local device_opt=()
	if [ "$1" = --without-kstaled ]; then
		device_opt=("$1")
		shift
	fi
	local name=$1 mib=$2 vcpus=${3:-1} image log disk xml
	image=$(debian_image)
	log=$KSTALED_CACHE/console-$name.log
	disk=$KSTALED_CACHE/disk-$name.qcow2
	virsh_ destroy "$name" >/dev/null 2>&1 || true
	rm -f "$log" "$disk"
	qemu-img create -q -f qcow2 -b "$image" -F raw "$disk" ||
		die "cannot create the overlay $disk on $image"
	local cache=${KSTALED_DEBIAN_DISK_CACHE:+" cache='$KSTALED_DEBIAN_DISK_CACHE'"} swap_disk=()
	if [ -n "${KSTALED_DEBIAN_SWAP_MIB:-}" ]; then
		rm -f "$disk.swap"
		truncate -s "${KSTALED_DEBIAN_SWAP_MIB}M" "$disk.swap"
		swap_disk=(-e "\|</disk>|a <disk type='file' device='disk'><driver name='qemu' type='raw'$cache/><source file='$disk.swap'/><target dev='vdb' bus='virtio'/></disk>")
	fi
	xml=$(mktemp)
	fill_domain kstaled-debian-domain.xml "${device_opt[@]}" "$name" "$mib" "$log" \
		-e "s|@VCPUS@|$vcpus|" -e "s|@DISK@|$disk|" \
		-e "s|<driver name='qemu' type='qcow2'/>|<driver name='qemu' type='qcow2'$cache/>|" \
		"${swap_disk[@]}" >"$xml"
	virsh_ create "$xml" >/dev/null || { rm -f "$xml"; die "virsh create $name failed"; }
	rm -f "$xml"
	echo "$log"
}

# debian_destroy NAME: stop the domain and drop its overlay.
debian_destroy() {
	virsh_ destroy "$1" >/dev/null 2>&1 || true
	rm -f "$KSTALED_CACHE/disk-$1.qcow2" "$KSTALED_CACHE/disk-$1.qcow2.swap"
}

# guest_agent NAME JSON: one guest agent command; its "return" is printed.
guest_agent() {
	virsh_ qemu-agent-command "$1" "$2" | jq -c '.return'
}

# debian_wait_agent NAME SECONDS: wait until the guest agent answers, that
# is, until the guest has booted far enough to start it.
debian_wait_agent() {
	local deadline=$((SECONDS + $2))
	while [ $SECONDS -lt "$deadline" ]; do
		guest_agent "$1" '{"execute":"guest-ping"}' >/dev/null 2>&1 && return 0
		sleep 2
	done
	return 1
}

# guest_sh NAME SCRIPT [SECONDS]: run SCRIPT with /bin/sh in the guest
# through the agent's guest-exec (timeout SECONDS, default 120); its
# standard output is printed, its standard error goes to ours, and its exit
# status is returned.
guest_sh() {
	local name=$1 script=$2 deadline=$((SECONDS + ${3:-120})) pid status
	pid=$(guest_agent "$name" "$(jq -cn --arg s "$script" \
		'{execute: "guest-exec", arguments: {path: "/bin/sh",
		  arg: ["-c", $s], "capture-output": true}}')" | jq -r '.pid') ||
		die "guest-exec in $name failed"
	while :; do
		status=$(guest_agent "$name" "{\"execute\":\"guest-exec-status\",\"arguments\":{\"pid\":$pid}}") ||
			die "guest-exec-status in $name failed"
		[ "$(jq -r '.exited' <<<"$status")" = true ] && break
		[ $SECONDS -lt "$deadline" ] ||
			die "'$script' did not finish in $name within ${3:-120} s"
		sleep 0.5
	done
	jq -r '."out-data" // empty' <<<"$status" | base64 -d
	jq -r '."err-data" // empty' <<<"$status" | base64 -d >&2
	return "$(jq -r '.exitcode // 255' <<<"$status")"
}

# debian_boot [--without-kstaled] NAME MEMORY_MIB [VCPUS]: start the
# guest (debian_start) and wait until it has booted (debian_wait_booted);
# the console log path is printed.
debian_boot() {
	local log name=$1
	[ "$name" != --without-kstaled ] || name=$2
	log=$(debian_start "$@")
	debian_wait_booted "$name" "$log"
	echo "$log"
}

# debian_wait_booted NAME CONSOLE: wait until guest NAME's systemd has
# finished booting (running or degraded).
debian_wait_booted() {
	local name=$1 log=$2 state
	debian_wait_agent "$name" 600 ||
		die "the guest agent of $name did not answer within 600 s; console: $(tail -n 20 "$log")"
	state=$(guest_sh "$name" 'systemctl is-system-running --wait' 600) || true
	case "$state" in
	running | degraded) ;;
	*) die "$name did not finish booting: systemctl is-system-running says '$state'" ;;
	esac
}

# redis_populate NAME KEYS BYTES: fill the guest's redis-server with KEYS
# values of BYTES each (key:0 ... key:KEYS-1); DEBUG is enabled for local
# clients in the image's redis.conf.  Prints the data set size in bytes.
redis_populate() {
	guest_sh "$1" "redis-cli DEBUG POPULATE $2 key $3" 600 >/dev/null ||
		die "redis DEBUG POPULATE failed in $1"
	guest_sh "$1" 'redis-cli INFO memory' | sed -n 's/^used_memory_dataset:\([0-9]*\).*/\1/p'
}

# redis_start_reader NAME HOT_KEYS: a service in the guest
# (redis-reader.service) that reads key:0 ... key:HOT_KEYS-1 once a second
# with one Lua call, and writes how long each pass took, in ms, to
# /run/redis-reader.ms: the service's latency as its client sees it.
redis_start_reader() {
	# Lua's [[long strings]] need no quotes inside the shell's.
	local lua="for i = 0, $(($2 - 1)) do redis.call([[GET]], [[key:]] .. i) end return 1"
	guest_sh "$1" "systemd-run --unit=redis-reader sh -c 'while :; do
		t0=\$(date +%s%N); redis-cli EVAL \"$lua\" 0 >/dev/null
		echo \$(((\$(date +%s%N) - t0) / 1000000)) >/run/redis-reader.ms; sleep 1; done'" >/dev/null ||
		die "cannot start the redis reader in $1"
}

# redis_sweep NAME SECONDS: read every value (DEBUG DIGEST), over and over
# for SECONDS, in a service of its own (redis-sweep.service): the working
# set jumps to the whole data set.
redis_sweep() {
	guest_sh "$1" "systemd-run --unit=redis-sweep sh -c 'end=\$((\$(date +%s) + $2))
		while [ \$(date +%s) -lt \$end ]; do redis-cli DEBUG DIGEST >/dev/null; done'" >/dev/null ||
		die "cannot start the redis sweep in $1"
}

# guest_oom_kills NAME: the OOM kill lines of the guest's kernel log since
# boot (nothing when there were none).
guest_oom_kills() {
	guest_sh "$1" "journalctl -k -b --no-pager | grep -Ei 'out of memory|oom-kill|invoked oom-killer' || true"
}
