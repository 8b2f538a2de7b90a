#!/bin/bash
# Builds the agent's QMP fuzzer with clang (libFuzzer + AddressSanitizer)
# from the agent's own parser sources and runs it for SECONDS (default 60)
# over a copy of the corpus kept in the repo.  Crashing inputs are kept in
# the work directory, printed, and fail the run.
#   bash host-agent/fuzz/run-fuzz.sh [SECONDS] [WORK-DIR]
set -euo pipefail
fuzz_dir=$(cd "$(dirname "$0")" && pwd)
src=$fuzz_dir/../src
seconds=${1:-60}
work=${2:-/var/tmp/kstaled-fuzz-qmp}

command -v clang >/dev/null || { echo "run-fuzz.sh: clang missing: run scripts/setup-host.sh" >&2; exit 1; }
mkdir -p "$work/corpus" "$work/artifacts"
# Build in the work directory: /tmp may be noexec.
# shellcheck disable=SC2046
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-I"$src" $(pkg-config --cflags glib-2.0 gio-2.0 json-c) \
	"$fuzz_dir/fuzz-qmp.c" "$src/kstaled-report.c" "$src/kstaled-policy.c" \
	"$src/kstaled-baselines.c" "$src/kstaled-host.c" "$src/kstaled-status.c" \
	"$src/kstaled-config.c" \
	$(pkg-config --libs glib-2.0 gio-2.0 json-c) -o "$work/fuzz-qmp"

cp "$fuzz_dir"/corpus/* "$work/corpus/"
set +e
"$work/fuzz-qmp" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
	-rss_limit_mb=1024 -dict="$fuzz_dir/qmp.dict" -print_final_stats=1 \
	-artifact_prefix="$work/artifacts/" "$work/corpus" 2>"$work/fuzz.log"
rc=$?
set -e
grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|Done )' "$work/fuzz.log" || true
if [ "$rc" -ne 0 ]; then
	tail -50 "$work/fuzz.log" >&2
	echo "run-fuzz.sh: fuzzer failed (rc $rc); inputs in $work/artifacts:" >&2
	ls -l "$work/artifacts" >&2
	exit 1
fi
echo "run-fuzz.sh: no crash in ${seconds} s; corpus $(find "$work/corpus" -type f | wc -l) inputs"
