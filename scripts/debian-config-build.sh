#!/bin/bash
# debian-config-build.sh: the series compiles with Debian's own amd64
# kernel config, not only with the guests' defconfig.  Debian's config
# turns on what the defconfig leaves off (NUMA balancing, 1024 nodes,
# 8192 CPUs, MEMCG_V1, DAMON, hotplug, BPF, ...), which is where a
# distribution user's build breaks.
#
# It applies the series to linux-source-6.12 and compiles, with
# linux-config-6.12's config.amd64_none_amd64 plus CONFIG_KSTALED=y and
# CONFIG_VIRTIO_KSTALED=m, then with Debian's config as is (kstaled off,
# where the hooks' stubs are what a distribution builds), the objects the
# series can break, derived from the patches: every C file a patch
# changes and every C file that includes a header a patch changes, where
# that config builds it (no vmlinux, no modpost).  The series' new files
# are then compiled again with W=1, and any W=1 warning fails the run.
# A success is stamped, keyed by the source and config versions, the
# patches and the scripts, so an unchanged run costs a few milliseconds.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib-debian-kernel.sh
. "$(dirname "$0")/lib-debian-kernel.sh"

[ $# -eq 0 ] || die "no arguments expected"

# The series' new C files: kstaled itself and the virtio driver.
new_objects=(mm/kstaled.o drivers/virtio/virtio_kstaled.o)

version=$(debian_kernel_version)
patches=()
debian_kernel_series
# What the patches change in the kernel proper (tools/ is not part of it).
mapfile -t changed_c < <(sed -n 's|^+++ b/\(.*\.c\)$|\1|p' "${patches[@]}" |
	grep -v '^tools/' | sort -u)
mapfile -t changed_h < <(sed -n 's|^+++ b/\(include/.*\.h\)$|\1|p' "${patches[@]}" | sort -u)
[ ${#changed_c[@]} -gt 0 ] || die "found no changed C file in the series"
# linux-config-6.12 comes from the same source package as linux-source-6.12:
# debian_kernel_config downloads the one whose version is the source's.
hash=$(input_hash "linux-source-6.12 $version" "linux-config-6.12 $version" \
	"${patches[@]}" "$0" "$KSTALED_TOP/scripts/lib-debian-kernel.sh")
stamp=$debian_kernel_root/stamps/debian-config-build-$hash

# candidate_sources SRC: the C files the series can break, one per line:
# those it changes, and those that include a header it changes (as
# <linux/x.h> for include/linux/x.h, <uapi/linux/x.h> or <linux/x.h> for
# include/uapi/linux/x.h).
candidate_sources() {
	local src=$1 header names=()
	for header in "${changed_h[@]}"; do
		header=${header#include/}
		names+=("$header")
		case "$header" in uapi/*) names+=("${header#uapi/}") ;; esac
	done
	{
		printf '%s\n' "${changed_c[@]}"
		(cd "$src" && grep -rlE --include='*.c' \
			"^#[[:space:]]*include[[:space:]]*<($(IFS='|'; echo "${names[*]//./\\.}"))>" \
			--exclude-dir=tools --exclude-dir=Documentation --exclude-dir=samples \
			--exclude-dir=scripts . |
			sed 's|^\./||' | awk -F/ '$1 != "arch" || $2 == "x86"')
	} | sort -u
}

# kbuild_entries SRC DIR NAME: the left-hand sides of DIR's Makefile (or
# Kbuild) lines that list NAME ("file.o" or "subdir/"), one per line.
kbuild_entries() {
	local makefile=$1/$2/Kbuild
	[ -f "$makefile" ] || makefile=$1/$2/Makefile
	[ -f "$makefile" ] || return 0
	# Continuation lines are joined first: lists span several lines.
	sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' "$makefile" |
		awk -v name="$3" '$2 ~ /^[:+]?=$/ { for (i = 3; i <= NF; i++) if ($i == name) { print $1; break } }'
}

# kbuild_builds SRC CONFIG DIR NAME: does CONFIG build NAME (an object
# "file.o" or a directory "subdir/") of DIR?  A single object given to
# make is compiled whatever the config says, so the config's own answer
# is read off the Makefiles: some line lists NAME in obj-y/obj-m, in
# obj-$(CONFIG_X) with X on, or in a composite object's list (foo-y,
# foo-objs, foo-$(CONFIG_X)) whose object or $(foo-y) is built; and DIR
# itself is reached from its parent the same way.  The top directories
# and arch/x86 are always reached.
kbuild_builds() {
	local src=$1 config=$2 dir=$3 name=$4 lhs option base
	while read -r lhs; do
		option=$(echo "$lhs" | grep -oE 'CONFIG_[A-Za-z0-9_]+' | head -n 1) || true
		if [ -n "$option" ]; then
			grep -qE "^$option=[ym]$" "$config" || continue
		fi
		base=${lhs%-*}
		case "$lhs" in
		obj-* | subdir-*) ;;
		*-y | *-objs | *-\$\(*)
			# A composite object, or a list that obj-y takes as $(foo-y).
			kbuild_builds "$src" "$config" "$dir" "$base.o" ||
				kbuild_builds "$src" "$config" "$dir" "\$($base-y)" || continue ;;
		*) continue ;;
		esac
		case "$dir" in
		*/*) [ "$dir" = arch/x86 ] ||
			kbuild_builds "$src" "$config" "${dir%/*}" "${dir##*/}/" || continue ;;
		esac
		return 0
	done < <(kbuild_entries "$src" "$dir" "$name")
	return 1
}

# objects_built SRC BUILD: the objects of candidate_sources that BUILD's
# config builds, one per line.
objects_built() {
	local src=$1 config=$2/.config file
	while read -r file; do
		kbuild_builds "$src" "$config" "${file%/*}" "$(basename "$file" .c).o" &&
			echo "${file%.c}.o"
	done < <(candidate_sources "$src")
	return 0
}

# compile_objects SRC BUILD LOG WHAT OBJECT...: compile the objects, each
# again (old copies removed, so a re-run compiles them too); -k, so that
# one run names every object that does not compile.
compile_objects() {
	local src=$1 build=$2 log=$3 what=$4 failed
	shift 4
	(cd "$build" && rm -f "$@")
	log "compiling $# objects $what (log: $log)"
	if ! debian_kernel_make "$src" "$build" -k "$@" >"$log" 2>&1; then
		grep -E '(error|Error):' "$log" | head -n 40 >&2 || true
		failed=$(sed -n 's/^make\[[0-9]*\]: \*\*\* \[[^]]*: \([^]]*\)\] Error.*/\1/p' "$log" |
			grep -E '/[^/]*\.[^/]*$' | sort -u | paste -sd ' ')
		die "failed to compile $what: ${failed:-(see the log)}; full log: $log"
	fi
}

build() {
	local src build off_build log start failed obj warnings objects=() off_objects=()
	[ -f "$stamp" ] && return
	start=$(date +%s)
	src=$(debian_kernel_tree kstaled)
	build=$(debian_kernel_build_dir kstaled)
	off_build=$(debian_kernel_build_dir kstaled-off)
	log=$debian_kernel_root/debian-config-build.log

	debian_kernel_configure "$src" "$build" kstaled
	mapfile -t objects < <(objects_built "$src" "$build")
	for obj in "${new_objects[@]}"; do
		printf '%s\n' "${objects[@]}" | grep -qxF "$obj" ||
			die "Debian's config + kstaled does not build $obj"
	done
	compile_objects "$src" "$build" "$log" "with Debian's config + kstaled" "${objects[@]}"

	# W=1 adds to every object's flags, so the prepare objects are
	# rebuilt first, apart; each new object is then compiled alone, and
	# any warning in that compile is its own or that of a header it
	# includes.
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

	debian_kernel_configure "$src" "$off_build" plain
	! grep -q '^CONFIG_KSTALED=' "$off_build/.config" ||
		die "Debian's config turned CONFIG_KSTALED on in $off_build"
	mapfile -t off_objects < <(objects_built "$src" "$off_build")
	compile_objects "$src" "$off_build" "$log.off" "with Debian's config (kstaled off)" \
		"${off_objects[@]}"

	mkdir -p "${stamp%/*}"
	echo "Debian $version amd64 config + series: ${#objects[@]} objects the series" \
		"changes or whose headers it changes compile with kstaled on," \
		"${#off_objects[@]} with it off; W=1 clean: ${new_objects[*]}" >"$stamp.tmp"
	mv "$stamp.tmp" "$stamp"
	log "compiled in $(($(date +%s) - start)) s"
}

# The tree is page-flags-budget's too: its lock is held while it is used.
layer_build debian-config-build "$stamp" with_lock debian-kernel-kstaled build
log "$(cat "$stamp")"
