#!/bin/bash
# The whole test suite, from a fresh Debian 12 machine, as root: installs
# what it needs, builds (or reuses from the cache) the patched guest
# kernel, QEMU, the host agent and the guest image, then runs every test
# through meson.  Extra arguments go to "meson test" (e.g. a test name).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

"$KSTALED_TOP/scripts/setup-host.sh"

build_dir=${KSTALED_BUILD_DIR:-$KSTALED_TOP/build}
meson_build "$build_dir"

set +e
/usr/bin/meson test -C "$build_dir" --print-errorlogs --num-processes 2 "$@"
rc=$?
set -e
# One closing line any CI reader understands.
jq -rs '[.[] | .result] | "\(map(select(. == "OK" or . == "EXPECTEDFAIL")) | length) passed, \(map(select(. == "FAIL" or . == "TIMEOUT" or . == "ERROR" or . == "UNEXPECTEDPASS")) | length) failed, \(map(select(. == "SKIP")) | length) skipped"' \
	"$build_dir/meson-logs/testlog.json"
exit "$rc"
