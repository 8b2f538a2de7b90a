#!/bin/bash
# section-7-hooks-off.sh OUTDIR: what a kernel built with kstaled costs
# when kstaled is off.  Anonymous page faults and 4 KiB page cache reads
# (tests/guest/bench-hooks-off.sh, tests/guest/hookbench.c) on the kernel
# built without kstaled, on the kstaled kernel with scanning never turned
# on (the hooks behind their static key) and on the kstaled kernel after
# two scans and scanning turned off again (the hooks live).  Each kernel
# boots KSTALED_BENCH_BOOTS times (default 3), interleaved, so that the
# host's drift under TCG falls on all three alike.  Writes
# OUTDIR/section-7-hooks-off.json.
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"
[ $# -eq 1 ] || die "usage: section-7-hooks-off.sh OUTDIR"
out=$1
boots=${KSTALED_BENCH_BOOTS:-3}
without=${KSTALED_KERNEL_WITHOUT_KSTALED:?KSTALED_KERNEL_WITHOUT_KSTALED is not set (bench/run.sh sets it)}

runs=()
for boot in $(seq "$boots"); do
	for config in "without-kstaled never $without" "kstaled never $KSTALED_KERNEL" \
		"kstaled stopped $KSTALED_KERNEL"; do
		read -r kernel state image <<<"$config"
		log "hooks off: boot $boot of $boots, $kernel kernel, kstaled $state"
		runs+=("$(guest_bench_json bench-hooks-off --kernel "$image" --mem 512 --timeout 900 \
			--append "kstaled_bench.state=$state" |
			jq -c --arg kernel "$kernel" --argjson boot "$boot" '{kernel: $kernel, boot: $boot} + .')")
	done
done

printf '%s\n' "${runs[@]}" | jq -s '
	def r(x): (x * 10 | round) / 10;
	def median: sort | .[length / 2 | floor];
	. as $runs |
	[group_by(.kernel + " " + .state)[] | {
		label: "\(.[0].kernel), kstaled \(.[0].state)",
		fault_best: (map(.result.fault_ns_best) | min),
		fault_median: (map(.result.fault_ns_median) | median),
		fault_spread: ((map(.result.fault_ns_median) | max) - (map(.result.fault_ns_median) | min)),
		read_best: (map(.result.read_ns_best) | min),
		read_median: (map(.result.read_ns_median) | median),
		read_spread: ((map(.result.read_ns_median) | max) - (map(.result.read_ns_median) | min))
	}] as $rows |
	($rows[] | select(.label | startswith("without-kstaled"))) as $base | {
	section: 7, name: "hooks-off", title: "Cost of the kstaled hooks when kstaled is off (guest, TCG)",
	columns: ["kernel", "fault ns/page best", "fault ns/page median", "fault spread",
		  "fault vs without %", "read ns/4KiB best", "read ns/4KiB median", "read spread",
		  "read vs without %"],
	rows: [ $rows[] | [.label, r(.fault_best), r(.fault_median), r(.fault_spread),
		r((.fault_median / $base.fault_median - 1) * 100), r(.read_best), r(.read_median),
		r(.read_spread), r((.read_median / $base.read_median - 1) * 100)] ],
	notes: ["\($runs | length / 3) boots per kernel, interleaved; each boot times \($runs[0].result.rounds) rounds over \($runs[0].result.mib) MiB and gives its best and median round",
		"median: median over boots of the per-boot median; spread: largest minus smallest per-boot median, the noise a difference has to exceed",
		"vs without %: median against the kernel built without kstaled; within the spreads, the difference is noise"],
	plot: {x: "kernel", y: ["fault vs without %", "read vs without %"], ylabel: "% slower than without kstaled"},
	runs: $runs
}' >"$out/section-7-hooks-off.json"
