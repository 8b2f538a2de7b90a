#!/bin/sh
# kstaled-ages: memory left alone moves up the histogram one scan at a
# time.  A 32 MiB region touched once must show in idle_N exactly N - 1
# scans after it first shows in idle (idle_1): idle_N at scan S equals
# idle at scan S - N + 1, for N = 2, 5 and 15, and is empty before.
. /guest/lib-kstaled.sh
cg=/sys/fs/cgroup/kstaled-ages
region=$((32 * MiB))
tolerance=$((region / 20))
# Two seconds per scan leave room to sample every one on a loaded host.
echo 2 >/sys/kernel/mm/kstaled/scan_seconds
memload_start /tmp/memload.log --cgroup $cg --size 32 --hot 0 --kind anon

# One line per published scan: scans idle idle_2 idle_5 idle_15.
first=$(kstaled_stat $cg scans)
last=$((first + 17))
log=/tmp/ages.log
: >$log
seen=-1
while [ "$seen" -lt "$last" ]; do
	row=$(awk '{ v[$1] = $2 }
		function idle(p) { return v[p "_clean"] + v[p "_dirty_file"] + v[p "_dirty_swap"] }
		END { print v["scans"], idle("idle"), idle("idle_2"), idle("idle_5"), idle("idle_15") }' \
		$cg/memory.idle_page_stats)
	scans=${row%% *}
	if [ "$scans" -ne "$seen" ]; then
		echo "$row" | tee -a $log
		[ "$seen" -lt 0 ] || [ "$scans" -eq $((seen + 1)) ] ||
			fail "scans went from $seen to $scans between two reads: the guest is too slow to sample every scan"
		seen=$scans
	fi
	sleep 0.2
done

# Every (S, N) pair: idle_N(S) against idle(S - N + 1).  "before" pairs
# have the region not yet idle, "after" pairs have all of it idle.
awk -v first="$first" -v region="$region" -v tol="$tolerance" '
	{ idle[$1] = $2; aged[$1, 2] = $3; aged[$1, 5] = $4; aged[$1, 15] = $5 }
	END {
		if (idle[first] > tol) {
			printf "FAIL: %d bytes idle at the first scan, before any could be\n", idle[first]
			exit 1
		}
		split("2 5 15", ns, " ")
		for (i = 1; i <= 3; i++) {
			n = ns[i]; before = 0; after = 0
			for (s = first + n - 1; (s, n) in aged; s++) {
				want = idle[s - n + 1]; got = aged[s, n]
				if (got < want - tol || got > want + tol) {
					printf "FAIL: idle_%d at scan %d is %d, idle at scan %d was %d\n", n, s, got, s - n + 1, want
					exit 1
				}
				if (want < tol) before++
				if (want > region - tol) after++
			}
			printf "idle_%d: %d scans before the region aged in, %d after\n", n, before, after
			if (!before || !after) {
				print "FAIL: idle_" n " was not seen both before and after the region aged in"
				exit 1
			}
		}
	}' $log
