#!/bin/bash
# section-2-accuracy.sh OUTDIR: idle memory per cgroup estimated by
# kstaled (memory.idle_page_stats) and by DAMON (paddr regions with no
# access, attributed to cgroups by /proc/kpagecgroup) against memload's
# known idle set, as error in % of guest memory, for anonymous and file
# workloads 10 %, 50 % and 90 % hot in two cgroups
# (tests/guest/bench-accuracy.sh measures).  Writes
# OUTDIR/section-2-accuracy.json.
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"
[ $# -eq 1 ] || die "usage: section-2-accuracy.sh OUTDIR"
out=$1

log "accuracy: 6 workloads in a 512 MiB guest"
guest_bench_json bench-accuracy --mem 512 --timeout 900 | jq '
	def r(x): (x * 100 | round) / 100;
	def mib(x): r(x / 1048576);
	(.mem_kib * 1024) as $mem | {
	section: 2, name: "accuracy", title: "Idle memory estimate vs truth (error in % of guest memory)",
	columns: ["workload", "kind", "hot %", "cgroup", "size MiB", "true idle MiB",
		  "kstaled MiB", "kstaled error %", "DAMON MiB", "DAMON error %"],
	rows: [ .scenarios[] | . as $s | .cgroups[] |
		["\($s.kind) \($s.hot_pct)% \(.name)", $s.kind, $s.hot_pct, .name, mib(.size_bytes),
		 mib(.true_idle_bytes), mib(.kstaled_idle_bytes),
		 r((.kstaled_idle_bytes - .true_idle_bytes) * 100 / $mem),
		 mib(.damon_idle_bytes), r((.damon_idle_bytes - .true_idle_bytes) * 100 / $mem)]
	],
	notes: ["guest memory \(.mem_kib / 1024 | floor) MiB; a positive error overestimates idle memory",
		"kstaled: idle for at least 1 scan at scan_seconds=1, after 3 scans; DAMON: default intervals for \(.damon_seconds) s, regions with nr_accesses 0 for at least 10 aggregation intervals (1 s); they run one after the other"],
	plot: {x: "workload", y: ["kstaled error %", "DAMON error %"], ylabel: "error, % of guest memory"},
	raw: .
}' >"$out/section-2-accuracy.json"
