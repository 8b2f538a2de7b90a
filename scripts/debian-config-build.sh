#!/bin/bash
# debian-config-build.sh: the series compiles with Debian's own amd64
# kernel config, not only with the guests' x86_64_defconfig.  Debian's
# config turns on what the defconfig leaves off (KASAN-free but NUMA
# balancing, 1024 nodes, 8192 CPUs, MEMCG_V1, DAMON, hotplug, BPF, ...),
# which is where a distribution user's build breaks.
#
# It applies the series to linux-source-6.12, configures it with
# linux-config-6.12's config.amd64_none_amd64 plus CONFIG_KSTALED=y and
# CONFIG_VIRTIO_KSTALED=m ("make olddefconfig"), compiles every object of
# mm/ fs/proc/ drivers/virtio/ kernel/ (no vmlinux, no modpost), then the
# series' new files again with W=1, and fails if W=1 warns about them.
# It then configures the same tree with Debian's config as is, where
# CONFIG_KSTALED is off, and compiles every directory holding a kernel C
# file the series changes: the hooks' stubs are what a distribution that
# leaves kstaled off builds.
# A success is stamped, keyed by the source and config versions, the
# patches and the scripts, so an unchanged run costs a few milliseconds.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib-debian-kernel.sh
. "$(dirname "$0")/lib-debian-kernel.sh"

[ $# -eq 0 ] || die "no arguments expected"

dirs=(mm/ fs/proc/ drivers/virtio/ kernel/)
# The series' new C files: kstaled itself and the virtio driver.
new_objects=(mm/kstaled.o drivers/virtio/virtio_kstaled.o)

version=$(debian_kernel_version)
patches=()
debian_kernel_series
# The directories of the kernel C files the series changes, built whole:
# one object alone would be compiled even where the config leaves it out.
# tools/ is not part of the kernel.
mapfile -t changed_dirs < <(sed -n 's|^--- a/\(.*/\)[^/]*\.c$|\1|p' "${patches[@]}" |
	grep -v '^tools/' | sort -u)
[ ${#changed_dirs[@]} -gt 0 ] || die "found no changed C file in the series"
# linux-config-6.12 comes from the same source package as linux-source-6.12:
# debian_kernel_config downloads the one whose version is the source's.
hash=$(input_hash "linux-source-6.12 $version" "linux-config-6.12 $version" \
	"${patches[@]}" "$0" "$KSTALED_TOP/scripts/lib-debian-kernel.sh")
stamp=$debian_kernel_root/stamps/debian-config-build-$hash
if [ -f "$stamp" ]; then
	log "up to date: $(cat "$stamp")"
	exit 0
fi

build() {
	local src build log start failed obj warnings compiled total
	[ -f "$stamp" ] && return
	start=$(date +%s)
	src=$(debian_kernel_tree kstaled)
	build=$(debian_kernel_build_dir kstaled)
	debian_kernel_configure "$src" "$build" kstaled
	log=$debian_kernel_root/debian-config-build.log
	log "make ${dirs[*]} (log: $log)"
	# -k: one run names every object that does not compile, not the first.
	if ! debian_kernel_make "$src" "$build" -k "${dirs[@]}" >"$log" 2>&1; then
		grep -E '(error|Error):' "$log" | head -n 40 >&2 || true
		failed=$(sed -n 's/^make\[[0-9]*\]: \*\*\* \[[^]]*: \([^]]*\)\] Error.*/\1/p' "$log" |
			grep -E '/[^/]*\.[^/]*$' | sort -u | paste -sd ' ')
		die "failed to compile with Debian's config: ${failed:-(see the log)}; full log: $log"
	fi
	compiled=$(grep -cE "^  CC( \[M\])? +($(IFS='|'; echo "${dirs[*]}")).*\.o$" "$log" || true)

	# W=1 adds to every object's flags, so the prepare objects are
	# rebuilt first, apart; each new object is then compiled alone (its
	# old copy removed, so a re-run compiles it again), and any warning
	# in that compile is its own or that of a header it includes.
	debian_kernel_make "$src" "$build" W=1 prepare >"$log.w1" 2>&1 ||
		{ tail -n 30 "$log.w1" >&2; die "make W=1 prepare failed; log: $log.w1"; }
	failed=
	for obj in "${new_objects[@]}"; do
		rm -f "$build/$obj"
		if ! debian_kernel_make "$src" "$build" W=1 "$obj" >"$log.w1" 2>&1; then
			cat "$log.w1" >&2
			die "$obj does not compile with W=1"
		fi
		warnings=$(grep -c 'warning:' "$log.w1" || true)
		if [ "$warnings" -gt 0 ]; then
			grep -B2 -A3 'warning:' "$log.w1" >&2
			failed+=" $obj ($warnings)"
		fi
	done
	[ -z "$failed" ] || die "W=1 warnings in:$failed"

	local off_build
	off_build=$(debian_kernel_build_dir kstaled-off)
	debian_kernel_configure "$src" "$off_build" plain
	! grep -q '^CONFIG_KSTALED=' "$off_build/.config" ||
		die "Debian's config turned CONFIG_KSTALED on in $off_build"
	log "make ${changed_dirs[*]} with kstaled off (log: $log.off)"
	if ! debian_kernel_make "$src" "$off_build" -k "${changed_dirs[@]}" >"$log.off" 2>&1; then
		grep -E '(error|Error):' "$log.off" | head -n 40 >&2 || true
		die "the series does not compile with kstaled off; full log: $log.off"
	fi

	total=$(find "${dirs[@]/#/$build/}" -name '*.o' | wc -l)
	mkdir -p "${stamp%/*}"
	echo "Debian $version amd64 config + series: $total objects in ${dirs[*]}" \
		"($compiled compiled this run), W=1 clean: ${new_objects[*]};" \
		"with kstaled off: ${changed_dirs[*]}" >"$stamp.tmp"
	mv "$stamp.tmp" "$stamp"
	log "$(cat "$stamp"), in $(($(date +%s) - start)) s"
}

with_lock debian-kernel-kstaled build
