#!/bin/bash
# page-flags-budget.sh: does the series' page flags fit in page->flags on
# a distribution kernel?  The guests' defconfig has few NUMA nodes and
# CPUs, so room to spare; Debian's amd64 config (NODES_SHIFT 10,
# NR_CPUS 8192) has almost none, and include/linux/page-flags-layout.h
# then silently takes the missing bits from MGLRU's reference tiers
# (LRU_REFS_WIDTH), then from last_cpupid (NUMA balancing), instead of
# failing the build.
#
# For linux-source-6.12 with Debian's own amd64 config, without and with
# the series (plus CONFIG_KSTALED=y, CONFIG_VIRTIO_KSTALED=m), it runs
# "make olddefconfig prepare" (which generates include/generated/bounds.h)
# and compiles a probe against page-flags-layout.h, then prints one line
# per tree.  It exits 1 if the series shrinks LRU_REFS_WIDTH or pushes
# last_cpupid out of page->flags.  The suite runs it as the
# page-flags-budget test.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib-debian-kernel.sh
. "$(dirname "$0")/lib-debian-kernel.sh"

[ $# -eq 0 ] || die "no arguments expected"

# measure VARIANT: print NAME=VALUE lines, the widths page->flags is cut
# into for that tree.  Runs holding the tree's lock.
measure() {
	local variant=$1 src build probe log
	src=$(debian_kernel_tree "$variant")
	build=$(debian_kernel_build_dir "$variant")
	debian_kernel_configure "$src" "$build" "$variant"
	log=$debian_kernel_root/page-flags-budget-$variant.log
	log "make prepare ($variant)"
	if ! debian_kernel_make "$src" "$build" prepare >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		die "make prepare failed ($variant); full log: $log"
	fi
	# An external-module directory, so the probe is compiled with exactly
	# the flags and include paths of the tree's own objects.
	probe=$debian_kernel_root/page-flags-probe-$variant
	rm -rf "$probe"
	mkdir -p "$probe"
	echo 'obj-m := page_flags_probe.o' >"$probe/Kbuild"
	cat >"$probe/page_flags_probe.c" <<'EOF'
// SPDX-License-Identifier: GPL-2.0
/* How page->flags is cut up: see include/linux/page-flags-layout.h. */
#include <asm/bitsperlong.h>
#include <linux/kbuild.h>
#include <linux/minmax.h>
#include <linux/page-flags-layout.h>

#ifdef LAST_CPUPID_NOT_IN_PAGE_FLAGS
#define LAST_CPUPID_IN_FLAGS 0
#else
#define LAST_CPUPID_IN_FLAGS 1
#endif

void page_flags_probe(void);
void page_flags_probe(void)
{
	DEFINE(BITS_PER_LONG, BITS_PER_LONG);
	DEFINE(NR_PAGEFLAGS, NR_PAGEFLAGS);
	DEFINE(ZONES_WIDTH, ZONES_WIDTH);
	DEFINE(SECTIONS_WIDTH, SECTIONS_WIDTH);
	DEFINE(NODES_WIDTH, NODES_WIDTH);
	DEFINE(KASAN_TAG_WIDTH, KASAN_TAG_WIDTH);
	DEFINE(LAST_CPUPID_WIDTH, LAST_CPUPID_WIDTH);
	DEFINE(LAST_CPUPID_IN_FLAGS, LAST_CPUPID_IN_FLAGS);
	DEFINE(LRU_GEN_WIDTH, LRU_GEN_WIDTH);
	DEFINE(LRU_REFS_WIDTH, LRU_REFS_WIDTH);
	DEFINE(FREE_BITS, BITS_PER_LONG - NR_PAGEFLAGS - ZONES_WIDTH -
		SECTIONS_WIDTH - NODES_WIDTH - KASAN_TAG_WIDTH -
		LAST_CPUPID_WIDTH - LRU_GEN_WIDTH - LRU_REFS_WIDTH);
}
EOF
	if ! debian_kernel_make "$src" "$build" M="$probe" page_flags_probe.s >>"$log" 2>&1; then
		tail -n 30 "$log" >&2
		die "the page->flags probe did not compile ($variant); full log: $log"
	fi
	# kbuild.h's DEFINE() leaves '.ascii "->NAME $VALUE NAME"' lines.
	sed -n 's/^[[:space:]]*\.ascii[[:space:]]*"->\([A-Z_]*\) [$#]*\([0-9-]*\) .*/\1=\2/p' \
		"$probe/page_flags_probe.s"
}

declare -A without with
for variant in plain kstaled; do
	lines=$(with_lock "debian-kernel-$variant" measure "$variant")
	[ "$(echo "$lines" | wc -l)" = 11 ] || die "unexpected probe output ($variant): $lines"
	while IFS='=' read -r name value; do
		if [ "$variant" = plain ]; then without[$name]=$value; else with[$name]=$value; fi
	done <<<"$lines"
done

# report NAME ARRAY: the line for one tree, and how the word splits.
report() {
	local -n w=$2
	local in_flags=no
	[ "${w[LAST_CPUPID_IN_FLAGS]}" = 1 ] && in_flags=yes
	echo "page-flags: $1: NR_PAGEFLAGS=${w[NR_PAGEFLAGS]} LRU_GEN_WIDTH=${w[LRU_GEN_WIDTH]} LRU_REFS_WIDTH=${w[LRU_REFS_WIDTH]} free-bits=${w[FREE_BITS]} last_cpupid-in-flags=$in_flags"
	log "$1: ${w[BITS_PER_LONG]} bits = ${w[NR_PAGEFLAGS]} flags + ${w[ZONES_WIDTH]} zone + ${w[SECTIONS_WIDTH]} section + ${w[NODES_WIDTH]} node + ${w[KASAN_TAG_WIDTH]} KASAN tag + ${w[LAST_CPUPID_WIDTH]} last_cpupid + ${w[LRU_GEN_WIDTH]} LRU gen + ${w[LRU_REFS_WIDTH]} LRU refs + ${w[FREE_BITS]} free"
}
report "without series" without
report "with series" with

added=$((with[NR_PAGEFLAGS] - without[NR_PAGEFLAGS]))
problems=()
[ "${with[LRU_REFS_WIDTH]}" -lt "${without[LRU_REFS_WIDTH]}" ] &&
	problems+=("shrinks LRU_REFS_WIDTH from ${without[LRU_REFS_WIDTH]} to ${with[LRU_REFS_WIDTH]} (MGLRU's reference tiers)")
[ "${without[LAST_CPUPID_IN_FLAGS]}" = 1 ] && [ "${with[LAST_CPUPID_IN_FLAGS]}" = 0 ] &&
	problems+=("pushes last_cpupid out of page->flags (NUMA balancing then needs page->_last_cpupid)")
if [ ${#problems[@]} -gt 0 ]; then
	msg="on Debian's amd64 config the series' $added page flags do not fit in the ${without[FREE_BITS]} free bit(s) of page->flags: it"
	for ((i = 0; i < ${#problems[@]}; i++)); do
		[ "$i" -gt 0 ] && msg+=" and"
		msg+=" ${problems[i]}"
	done
	die "$msg"
fi
log "the series adds $added page flag(s): ${with[FREE_BITS]} bit(s) of page->flags left (${without[FREE_BITS]} without it)"
