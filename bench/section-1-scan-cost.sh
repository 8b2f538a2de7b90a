#!/bin/bash
# section-1-scan-cost.sh OUTDIR: kstaled's CPU cost per scanned page and
# per full scan at 512 MiB, 1 GiB and 2 GiB of guest memory (by default),
# beside a userspace page_idle bitmap pass and DAMON (paddr) over the same
# memory in the same guest (tests/guest/bench-scan-cost.sh measures; this turns
# its raw figures into rows).  Writes OUTDIR/section-1-scan-cost.json.
# Environment: KSTALED_BENCH_SCANS (full scans per measurement, default
# 10), KSTALED_BENCH_MEM_MIB (guest sizes, default "512 1024 2048").
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"
[ $# -eq 1 ] || die "usage: section-1-scan-cost.sh OUTDIR"
out=$1
scans=${KSTALED_BENCH_SCANS:-10}

runs=()
for mem in ${KSTALED_BENCH_MEM_MIB:-512 1024 2048}; do
	log "scan cost at $mem MiB, $scans scans"
	runs+=("$(guest_bench_json bench-scan-cost --mem "$mem" --timeout 900 \
		--append "kstaled_bench.scans=$scans" | jq -c --argjson mem "$mem" '{mem_mib: $mem} + .')")
done

printf '%s\n' "${runs[@]}" | jq -s '
	def r(x): if x == null then null else (x * 100 | round) / 100 end;
	. as $runs | {
	section: 1, name: "scan-cost", title: "Scan cost (guest CPU time, TCG)",
	columns: ["guest MiB", "method", "pages/pass", "ms/pass", "ns/page",
		  "CPU %", "ns/page vs page_idle"],
	rows: [ $runs[] | (1000 / .ticks_per_second) as $ms_per_tick |
		(.kstaled.cpu_ticks * $ms_per_tick * 1e6 / (.scans * .span_pages)) as $k_ns |
		(.page_idle.cpu_ticks * $ms_per_tick * 1e6 / (.page_idle.passes * .page_idle.pages)) as $p_ns |
		[.mem_mib, "kstaled", .span_pages, r(.kstaled.cpu_ticks * $ms_per_tick / .scans),
		 r($k_ns), r(.kstaled.cpu_ticks * $ms_per_tick * 100 / .kstaled.wall_ms),
		 r(if $p_ns > 0 then $k_ns / $p_ns else null end)],
		[.mem_mib, "page_idle", .page_idle.pages,
		 r(.page_idle.cpu_ticks * $ms_per_tick / .page_idle.passes), r($p_ns), null, 1],
		[.mem_mib, "DAMON paddr", null, null, null,
		 r(.damon.cpu_ticks * $ms_per_tick * 100 / .damon.wall_ms), null]
	],
	notes: ["CPU time is the guest'"'"'s tick-sampled utime+stime (10 ms ticks) of the kstaled kthread, of the dd processes doing the page_idle passes (mark all idle, read back) and of kdamond",
		"CPU % is CPU time over the time measured, both on the guest'"'"'s tick clock (a loaded TCG guest loses ticks against wall time)",
		"kstaled runs at scan_seconds=1; DAMON with its default intervals for the wall time of kstaled'"'"'s scans; half of guest memory holds idle anonymous memory"],
	plot: {x: "guest MiB", series: "method", y: "ns/page", ylabel: "ns of guest CPU per scanned page"},
	runs: $runs
}' >"$out/section-1-scan-cost.json"
