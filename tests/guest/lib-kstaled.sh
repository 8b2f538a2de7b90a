# Helpers for the in-guest kstaled tests; sourced, not run:
#   . /guest/lib-kstaled.sh
# Sizes are in bytes, as memory.idle_page_stats reports them.

MiB=$((1024 * 1024))

# To stderr, so that a failure inside $(...) still reaches the console.
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# kstaled_stat CGROUP KEY: one row of CGROUP/memory.idle_page_stats.
kstaled_stat() {
	awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' \
		"$1/memory.idle_page_stats" || fail "no row '$2' in $1/memory.idle_page_stats"
}

# kstaled_idle CGROUP [BUCKET]: idle bytes of every kind idle for at
# least BUCKET scans (1, 2, 5, 15, ...; default 1).
kstaled_idle() {
	local prefix=idle
	[ "${2:-1}" = 1 ] || prefix=idle_$2
	awk -v p="$prefix" '$1 == p "_clean" || $1 == p "_dirty_file" ||
		$1 == p "_dirty_swap" { sum += $2; n++ }
		END { if (n != 3) exit 1; print sum }' "$1/memory.idle_page_stats" ||
		fail "no $prefix rows in $1/memory.idle_page_stats"
}

# kstaled_wait_scans CGROUP N: wait until N more full scans are published.
kstaled_wait_scans() {
	local start
	start=$(kstaled_stat "$1" scans)
	while [ $(($(kstaled_stat "$1" scans) - start)) -lt "$2" ]; do
		sleep 0.2
	done
}

# tool_start LOG TOOL ARGS...: start the guest tool TOOL with ARGS in the
# background, its output in LOG, and wait for its "TOOL: ready" line; sets
# tool_pid.  Every tool started is killed when the test exits.
tool_pids=
tool_start() {
	local log=$1 tool=$2 tries=0
	shift 2
	"$tool" "$@" >"$log" 2>&1 &
	tool_pid=$!
	tool_pids="$tool_pids $tool_pid"
	trap 'kill $tool_pids 2>/dev/null || true' EXIT
	until grep -q "^$tool: ready" "$log" 2>/dev/null; do
		kill -0 "$tool_pid" 2>/dev/null || fail "$tool $* died: $(cat "$log")"
		tries=$((tries + 1))
		[ "$tries" -lt 600 ] || fail "$tool $* not ready after 60 s"
		sleep 0.1
	done
	cat "$log"
}

# wait_scan_seconds N SECONDS: wait at most SECONDS for the host to set
# kstaled's scan_seconds to N through the device.
wait_scan_seconds() {
	local knob=/sys/kernel/mm/kstaled/scan_seconds tries=0
	until [ "$(cat $knob)" = "$1" ]; do
		tries=$((tries + 1))
		[ $tries -lt $(($2 * 10)) ] ||
			fail "scan_seconds is $(cat $knob), not the host's $1, after $2 s"
		sleep 0.1
	done
}

# memload_start LOG ARGS...: tool_start for memload; sets memload_pid.
memload_start() {
	local log=$1
	shift
	tool_start "$log" memload "$@"
	memload_pid=$tool_pid
}

# idle_region_start CGROUP MIB: scan every second and start memload with
# MIB MiB in CGROUP, touched once: referenced at kstaled's first scan,
# idle from then on.  Sets memload_pid, region_addr, and region and
# tolerance (5 % of it) in bytes.
idle_region_start() {
	region=$(($2 * MiB))
	tolerance=$((region / 20))
	echo 1 >/sys/kernel/mm/kstaled/scan_seconds
	memload_start /tmp/memload.log --cgroup "$1" --size "$2" --hot 0
	region_addr=$(sed -n 's/.* addr=\(0x[0-9a-f]*\).*/\1/p' /tmp/memload.log)
}

# expect_region_idle CGROUP SCANS WHEN: wait SCANS more scans, then expect
# the whole region in idle_5 and nothing more of CGROUP idle (WHEN says at
# which step of the test).
expect_region_idle() {
	kstaled_wait_scans "$1" "$2"
	cat "$1/memory.idle_page_stats"
	expect_near "idle_5 $3" "$(kstaled_idle "$1" 5)" "$region" "$tolerance"
	expect_near "idle $3" "$(kstaled_idle "$1")" "$region" "$tolerance"
}

# region_pfns FILE: the page frame of each page of the region, a line per
# page, into FILE (from /proc/PID/pagemap).
region_pfns() {
	pagestate --pfns "$1" "$memload_pid" "$region_addr" "$region"
}

# expect_region_moved BEFORE WHAT: after WHAT, at least half of the
# region's pages are in other page frames than region_pfns put in BEFORE,
# enough to test what migration does to their ages.
expect_region_moved() {
	local pages=$((region / 4096)) moved
	region_pfns /tmp/pfns.after
	moved=$(awk 'NR == FNR { before[FNR] = $1; next }
		$1 != before[FNR] { n++ } END { print n + 0 }' "$1" /tmp/pfns.after)
	echo "$2 moved $moved of the region's $pages pages"
	[ "$moved" -ge $((pages / 2)) ] ||
		fail "$2 moved only $moved of $pages pages: too few to test migration"
}

# fragment_memory ORDER [STRIDE]: leave the guest no free block of ORDER
# pages or more that a kernel allocation could take, keeping one page in
# STRIDE (tests/guest/fragment.c), with compaction, which would undo it,
# kept away.  Sets fragment_pid.
fragment_memory() {
	echo 1000 >/proc/sys/vm/extfrag_threshold
	echo 0 >/proc/sys/vm/compaction_proactiveness
	tool_start /tmp/fragment.log fragment "$@"
	fragment_pid=$tool_pid
	cat /proc/buddyinfo
}

# pagestate_field LINE KEY: the number after KEY= in pagestate's output
# line LINE (pages, present, idle, kpfN...).
pagestate_field() {
	echo "$1" | sed -n "s/.* $2=\([0-9]*\).*/\1/p"
}

# expect_near WHAT GOT WANT TOLERANCE: GOT within WANT +- TOLERANCE bytes.
expect_near() {
	echo "$1: got $2, want $3 +- $4"
	[ "$2" -ge $(($3 - $4)) ] && [ "$2" -le $(($3 + $4)) ] ||
		fail "$1: $2 bytes is not within $4 of $3"
}

# expect_below WHAT GOT LIMIT
expect_below() {
	echo "$1: got $2, want < $3"
	[ "$2" -lt "$3" ] || fail "$1: $2 bytes is not below $3"
}

# cmdline_param NAME DEFAULT: the value of NAME=VALUE on the kernel
# command line, or DEFAULT.
cmdline_param() {
	local arg value=$2
	for arg in $(cat /proc/cmdline); do
		case "$arg" in "$1"=*) value=${arg#*=} ;; esac
	done
	echo "$value"
}

# zram_swap SIZE: swap on a zram device of SIZE (e.g. 300M), where the
# balloon can push idle anonymous memory.
zram_swap() {
	echo "$1" >/sys/block/zram0/disksize || fail "cannot size zram0 to $1"
	mkswap /dev/zram0 >/dev/null || fail "mkswap /dev/zram0 failed"
	swapon /dev/zram0 || fail "swapon /dev/zram0 failed"
}

# ramdisk_ext4: ext4 on /dev/ram0 mounted at /mnt, a block device whose
# page cache can be dirty and written back.
ramdisk_ext4() {
	mke2fs -q /dev/ram0 >/dev/null || fail "mke2fs /dev/ram0 failed"
	mount -t ext4 /dev/ram0 /mnt || fail "cannot mount /dev/ram0 on /mnt"
}

# task_cpu_ticks PID: user + system CPU time of a task, in USER_HZ ticks
# (100 per second on x86).
task_cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# children_cpu_ticks: CPU time of this shell's finished children.
children_cpu_ticks() {
	awk '{ print $16 + $17 }' /proc/$$/stat
}

# uptime_ms: monotonic wall clock of the guest, in milliseconds.
uptime_ms() {
	awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime
}

# tick_ms: the kernel's tick clock (jiffies, which kstaled paces itself
# by), in milliseconds: the ticks /proc/stat accounts per CPU.  A busy
# TCG guest with a periodic tick loses ticks against /proc/uptime.
tick_ms() {
	awk '$1 == "cpu" { for (i = 2; i <= 9; i++) ticks += $i }
		$1 ~ /^cpu[0-9]/ { cpus++ }
		END { printf "%d\n", ticks * 10 / cpus }' /proc/stat
}

# kthread_pid NAME: pid of the kernel thread whose comm is NAME.
kthread_pid() {
	local comm
	for comm in /proc/[0-9]*/comm; do
		[ "$(cat "$comm" 2>/dev/null)" = "$1" ] && { comm=${comm%/comm}; echo "${comm#/proc/}"; return; }
	done
	fail "no kernel thread named $1"
}

# The guest's page frame span, as kstaled walks it: "START END" pfns of
# the populated zones.
pfn_span() {
	awk '$1 == "spanned" { spanned = $2 }
		$1 == "start_pfn:" && spanned { s = $2; e = $2 + spanned
			if (!lo || s < lo) lo = s; if (e > hi) hi = e }
		END { print lo, hi }' /proc/zoneinfo
}

# damon_paddr_setup: one DAMON context monitoring every System RAM range
# of physical memory, with DAMON's default intervals, not yet started.
# DAMON_ADMIN is the sysfs directory of its kdamond.
DAMON_ADMIN=/sys/kernel/mm/damon/admin/kdamonds/0
damon_paddr_setup() {
	local ctx=$DAMON_ADMIN/contexts/0 target i=0
	echo 1 >/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds
	echo 1 >$DAMON_ADMIN/contexts/nr_contexts
	echo paddr >$ctx/operations
	echo 1 >$ctx/targets/nr_targets
	target=$ctx/targets/0
	grep ' : System RAM$' /proc/iomem >/tmp/ram-ranges
	echo "$(wc -l </tmp/ram-ranges)" >$target/regions/nr_regions
	while IFS='- ' read -r start end _; do
		echo $((0x$start)) >$target/regions/$i/start
		echo $((0x$end + 1)) >$target/regions/$i/end
		i=$((i + 1))
	done </tmp/ram-ranges
}

# damon_idle_scheme MIN_AGE: make DAMON's one scheme a "stat" of regions
# with no access seen for at least MIN_AGE aggregation intervals.
damon_idle_scheme() {
	local scheme=$DAMON_ADMIN/contexts/0/schemes/0
	echo 1 >$DAMON_ADMIN/contexts/0/schemes/nr_schemes
	echo stat >$scheme/action
	echo 18446744073709551615 >$scheme/access_pattern/sz/max
	echo 0 >$scheme/access_pattern/nr_accesses/max
	echo 4294967295 >$scheme/access_pattern/age/max
	echo "$1" >$scheme/access_pattern/age/min
}

# damon_idle_regions: "START_PFN END_PFN" of each region the idle scheme
# matched, as of now.
damon_idle_regions() {
	local regions=$DAMON_ADMIN/contexts/0/schemes/0/tried_regions region
	echo update_schemes_tried_regions >$DAMON_ADMIN/state
	for region in $regions/[0-9]*; do
		[ -d "$region" ] || continue
		echo "$(($(cat $region/start) / 4096)) $(($(cat $region/end) / 4096))"
	done | sort -n
}

# pages_by_cgroup REGIONS END_PFN: "CGROUP_INO PAGES" for every memory
# cgroup owning pages inside the pfn ranges of the file REGIONS, from
# /proc/kpagecgroup.
pages_by_cgroup() {
	dd if=/proc/kpagecgroup bs=65536 count=$((($2 * 8 + 65535) / 65536)) 2>/dev/null |
		od -An -tu8 -v -w8 |
		awk -v regions="$1" '
			BEGIN { while ((getline line < regions) > 0) { split(line, r, " "); lo[n] = r[1]; hi[n++] = r[2] } }
			{ while (i < n && pfn >= hi[i]) i++
			  if (i < n && pfn >= lo[i] && $1) pages[$1]++
			  pfn++ }
			END { for (ino in pages) print ino, pages[ino] }'
}
