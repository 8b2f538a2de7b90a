#!/bin/sh
# kstaled-off-page-owner: booted with kstaled=off beside another page_ext
# user (page_owner=on), /proc/kpageflags reports no page stale.  kstaled
# then has no room in page_ext, and reading its stale bit there would read
# page_owner's "allocated" bit instead: every page of a 16 MiB allocation
# would show KPF_STALE.
. /guest/lib-kstaled.sh
KPF_STALE=27	# include/uapi/linux/kernel-page-flags.h
dmesg | grep "kstaled: off: booted with kstaled=off" ||
	fail "no 'kstaled: off' line in dmesg"
dmesg | grep "bytes of page_ext" ||
	fail "page_owner=on allocated no page_ext: nothing for kstaled to misread"
memload_start /tmp/memload.log --cgroup /sys/fs/cgroup/kstaled-off-page-owner \
	--size 16 --hot 0
addr=$(sed -n 's/.* addr=\(0x[0-9a-f]*\).*/\1/p' /tmp/memload.log)
state=$(pagestate --kpf $KPF_STALE "$memload_pid" "$addr" $((16 * MiB)))
echo "$state"
[ "$(pagestate_field "$state" present)" -eq $((16 * MiB / 4096)) ] || fail "pages of the allocation missing"
expect_near "stale pages" "$(pagestate_field "$state" kpf$KPF_STALE)" 0 0
