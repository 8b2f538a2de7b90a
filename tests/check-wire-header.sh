#!/bin/bash
# check-wire-header.sh MODE PATCHDIR
# Check that the copy of the kstaled wire header carried by a patch series
# equals the canonical docs/virtio_kstaled.h.
#   MODE qemu:   include/standard-headers/linux/virtio_kstaled.h, compared
#                with the canonical header passed through the same sed
#                transformation as QEMU's scripts/update-linux-headers.sh
#                (cp_portable, QEMU 10.0.2).
#   MODE kernel: include/uapi/linux/virtio_kstaled.h, compared verbatim.
# Both modes also check that the series adds VIRTIO_ID_KSTALED to
# virtio_ids.h with the value the canonical header documents.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
canonical=$top/docs/virtio_kstaled.h
mode=${1:?usage: $0 qemu|kernel PATCHDIR}
dir=${2:?usage: $0 qemu|kernel PATCHDIR}
dir=$(cd "$dir" && pwd)
case "$mode" in
qemu) path=include/standard-headers/linux/virtio_kstaled.h
	ids=include/standard-headers/linux/virtio_ids.h ;;
kernel) path=include/uapi/linux/virtio_kstaled.h
	ids=include/uapi/linux/virtio_ids.h ;;
*) echo "unknown mode '$mode'" >&2; exit 2 ;;
esac
[ -f "$dir/series" ] || { echo "no series file in $dir" >&2; exit 2; }
# The kernel's driver patches follow the main series in series.driver.
series_files=("$dir/series")
[ -f "$dir/series.driver" ] && series_files+=("$dir/series.driver")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/tree"
while read -r name _; do
	case "$name" in "" | "#"*) continue ;; esac
	(cd "$tmp/tree" && git apply --include="$path" "$dir/$name")
done < <(cat "${series_files[@]}")
[ -f "$tmp/tree/$path" ] || { echo "FAIL: the series does not create $path" >&2; exit 1; }

portable() {
	sed -e 's/__aligned_u64/__u64 __attribute__((aligned(8)))/g' \
	    -e 's/__u\([0-9][0-9]*\)/uint\1_t/g' \
	    -e 's/u\([0-9][0-9]*\)/uint\1_t/g' \
	    -e 's/__s\([0-9][0-9]*\)/int\1_t/g' \
	    -e 's/__le\([0-9][0-9]*\)/uint\1_t/g' \
	    -e 's/__be\([0-9][0-9]*\)/uint\1_t/g' \
	    -e 's/<linux\/\([^>]*\)>/"standard-headers\/linux\/\1"/' \
	    -e '/<asm\/\([^>]*\)>/d' \
	    -e 's/__bitwise//' \
	    -e 's/__attribute__((packed))/QEMU_PACKED/' \
	    -e 's/__inline__/inline/' "$1"
}
if [ "$mode" = qemu ]; then portable "$canonical" >"$tmp/expected"
else cp "$canonical" "$tmp/expected"; fi
if ! diff -u "$tmp/expected" "$tmp/tree/$path"; then
	echo "FAIL: $path in $dir differs from docs/virtio_kstaled.h ($mode)" >&2
	exit 1
fi
want=$(sed -n 's/.*VIRTIO_ID_KSTALED (\([0-9]*\)).*/\1/p' "$canonical")
got=$(cat "$dir"/*.patch | sed -n "s/^+#define[[:space:]]*VIRTIO_ID_KSTALED[[:space:]]*\([0-9]*\).*/\1/p" | head -n 1)
if [ "$got" != "$want" ]; then
	echo "FAIL: $ids: VIRTIO_ID_KSTALED is '${got:-missing}', want $want" >&2
	exit 1
fi
echo "1 passed, 0 failed: $mode wire header in $dir matches docs/virtio_kstaled.h"
