# Helpers for tests and the demo that run guests under a real libvirtd;
# sourced after scripts/lib.sh.
# shellcheck shell=bash

LIBVIRT_URI=qemu:///system
virsh_() { virsh -q -c "$LIBVIRT_URI" "$@"; }

# libvirt_start: use the running libvirtd, or start one and remember its
# pid so libvirt_stop stops exactly what was started here.
libvirt_started_pid=
libvirt_start() {
	local i
	if virsh_ uri >/dev/null 2>&1; then
		return
	fi
	command -v libvirtd >/dev/null || die "libvirtd missing: run scripts/setup-host.sh"
	grep -q '^# kstaled-vm: settings' /etc/libvirt/qemu.conf ||
		die "/etc/libvirt/qemu.conf lacks kstaled-vm's settings: run scripts/setup-host.sh"
	local pidfile=$KSTALED_CACHE/libvirtd.pid
	mkdir -p "$KSTALED_CACHE"
	rm -f "$pidfile"
	libvirtd -d -p "$pidfile" || die "libvirtd failed to start"
	for i in $(seq 100); do
		virsh_ uri >/dev/null 2>&1 && break
		sleep 0.1
	done
	virsh_ uri >/dev/null 2>&1 || die "libvirtd started but $LIBVIRT_URI does not answer"
	libvirt_started_pid=$(cat "$pidfile")
}

libvirt_stop() {
	[ -n "$libvirt_started_pid" ] || return 0
	kill "$libvirt_started_pid" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$libvirt_started_pid" 2>/dev/null || break
		sleep 0.1
	done
	libvirt_started_pid=
}

# fill_domain TEMPLATE [--without-kstaled] NAME MEMORY_MIB CONSOLE_LOG
# [SED-ARG...]: docs/TEMPLATE with the placeholders every kstaled-vm domain
# has filled in (name, memory, console, this build's emulator, the kstaled
# device's settings), then the template's own through SED-ARG.  The
# device starts with KSTALED_SCAN_SECONDS (default 1) and
# KSTALED_STALE_PAGE_AGE (default 5); --without-kstaled leaves it out.
# KSTALED_BALLOON_AUTODEFLATE=on makes the balloon deflate on OOM;
# KSTALED_BALLOON_FREE_PAGE_REPORTING=on makes the guest report its free
# pages, which the host then discards.
fill_domain() {
	local template=$1 drop_device=() emulator balloon_attrs=
	shift
	if [ "$1" = --without-kstaled ]; then
		drop_device=(-e '/^ *<qemu:commandline>$/,/^ *<\/qemu:commandline>$/d')
		shift
	fi
	local name=$1 mib=$2 log=$3
	shift 3
	emulator=$(guest_qemu)
	balloon_attrs+=${KSTALED_BALLOON_AUTODEFLATE:+" autodeflate='$KSTALED_BALLOON_AUTODEFLATE'"}
	balloon_attrs+=${KSTALED_BALLOON_FREE_PAGE_REPORTING:+" freePageReporting='$KSTALED_BALLOON_FREE_PAGE_REPORTING'"}
	sed -e "s|@NAME@|$name|" -e "s|@MEMORY_MIB@|$mib|g" \
		-e "s|@CONSOLE_LOG@|$log|" -e "s|@EMULATOR@|$emulator|" \
		-e "s|@SCAN_SECONDS@|${KSTALED_SCAN_SECONDS:-1}|" \
		-e "s|@STALE_PAGE_AGE@|${KSTALED_STALE_PAGE_AGE:-5}|" \
		"${drop_device[@]}" \
		-e "s|<memballoon model='virtio'>|<memballoon model='virtio'$balloon_attrs>|" \
		"$@" "$KSTALED_TOP/docs/$template"
}

# domain_xml [--without-kstaled] NAME MEMORY_MIB CMDLINE CONSOLE_LOG:
# docs/kstaled-domain.xml filled in (fill_domain) with this build's kernel
# and initramfs and the kernel command line CMDLINE.
domain_xml() {
	local device_opt=()
	if [ "$1" = --without-kstaled ]; then
		device_opt=("$1")
		shift
	fi
	# Separate assignments, so that a failing lookup stops the caller.
	local kernel initrd
	kernel=$(guest_kernel)
	initrd=$(guest_initramfs)
	fill_domain kstaled-domain.xml "${device_opt[@]}" "$1" "$2" "$4" \
		-e "s|@CMDLINE@|$3|" -e "s|@KERNEL@|$kernel|" -e "s|@INITRD@|$initrd|"
}

# domain_start [--without-kstaled] NAME MEMORY_MIB CMDLINE: start a
# transient domain (with the kstaled device unless --without-kstaled); its
# console log path is printed.  Any leftover domain of that name goes first.
domain_start() {
	local opt="" name log xml
	if [ "$1" = --without-kstaled ]; then
		opt=$1
		shift
	fi
	name=$1
	log=$KSTALED_CACHE/console-$1.log
	virsh_ destroy "$name" >/dev/null 2>&1 || true
	rm -f "$log"
	xml=$(mktemp)
	domain_xml $opt "$name" "$2" "$3" "$log" >"$xml"
	virsh_ create "$xml" >/dev/null || { rm -f "$xml"; die "virsh create $name failed"; }
	rm -f "$xml"
	echo "$log"
}

domain_destroy() {
	virsh_ destroy "$1" >/dev/null 2>&1 || true
}

# wait_for_file_line FILE PATTERN SECONDS: wait until FILE has a line
# matching the extended regex PATTERN.
wait_for_file_line() {
	local file=$1 pattern=$2 deadline=$((SECONDS + $3))
	while [ $SECONDS -lt "$deadline" ]; do
		grep -qE "$pattern" "$file" 2>/dev/null && return 0
		sleep 0.2
	done
	return 1
}

# domain_kib NAME KEY: a dommemstat value in KiB ("actual" is the
# balloon's current size as QEMU reports it).
domain_kib() {
	virsh_ dommemstat "$1" | awk -v k="$2" '$1 == k { print $2 }'
}

# domain_qemu_pid NAME: the pid of the QEMU that runs domain NAME.
domain_qemu_pid() {
	cat "/run/libvirt/qemu/$1.pid"
}

# qemu_rss_kib PID GUEST_MIB: what the host holds for a QEMU, in KiB, as
# "GUEST_RAM OWN": the resident set of its guest-RAM mapping (the one
# mapping of exactly the guest's size) and of all its other mappings
# (QEMU's own memory: under TCG mostly the translation buffer).
qemu_rss_kib() {
	awk -v ram=$(($2 * 1024)) '
		/^Size:/ { size = $2 }
		/^Rss:/ { if (size == ram) { guest += $2; n++ } else own += $2 }
		END {
			if (n != 1) { print "no single guest-RAM mapping of " ram " KiB" > "/dev/stderr"; exit 1 }
			print guest, own
		}' "/proc/$1/smaps"
}
