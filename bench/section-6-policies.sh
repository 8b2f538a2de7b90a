#!/bin/bash
# section-6-policies.sh OUTDIR: the balloon policies side by side, measured
# where the host feels them: the resident set of each QEMU's guest-RAM
# mapping.
#
# Arms (docs/balloon-policy.md cites each one's source):
#   static-fpr   no balloon policy, free page reporting on (what KubeVirt
#                runs by default): the reference every policy must beat;
#   mom          oVirt MOM's balloon rules, as vdsm ships them;
#   proxmox      Proxmox VE's auto-ballooning, balloon_min = min-memory-mib;
#   kstaled-fpr  the agent's kstaled policy, free page reporting on.
# The baselines' guests run without the kstaled device, so kstaled does not
# scan there: the kstaled arm pays for its own scanning.
#
# Configurations (KSTALED_BENCH_CONFIGS, default "disk-swap no-swap"):
#   disk-swap  redis-server with 256 MiB of values (half random), GETs from
#              a hot set of 26 MiB that jumps to 154 MiB halfway through
#              the policy window; guest swap on a virtio-blk disk;
#   no-swap    no guest swap at all (most cloud guests): a 384 MiB file read
#              in 4 MiB pieces from a hot range of 32 MiB that jumps to
#              128 MiB halfway; only idle page cache can go.
# Both disks have cache=none, so the host's page cache holds nothing of
# the guests'.
#
# One run boots one Debian guest of 1024 MiB per arm, all at once (the
# arms share the machine, its load and its noise), touches all of guest
# RAM as a long-running guest has (a file written once fills its page
# cache and stays there, cold), fills the workload, runs it for
# KSTALED_BENCH_PRE_SECONDS (default 60) without a policy (the guest's own
# reference), then KSTALED_BENCH_POLICY_SECONDS (default 240) with each
# arm's agent.  Each arm's QEMU is charged to a memory cgroup of its own
# (libvirtd outside them) whose soft limit is the arm's budget, set when
# the policies start so that 12 % of it is free: a host short of memory
# (under MOM's 20 % pressure threshold, over Proxmox's 80 % target, under
# the agent's host-low-percent), not a critical one; the hard limit stays
# off, so the host never kills a QEMU.  Runs repeat
# KSTALED_BENCH_REPS times (default 3); each repetition puts the arms on
# other guest slots.  Every 2 s the host samples each QEMU's guest-RAM
# and own resident memory, its balloon and its cgroup's memory.stat.
#
# bench/policies.py turns the runs into OUTDIR/section-6-policies.json;
# the raw data stay in OUTDIR/section-6-policies/CONFIG/REP/ARM/.
set -euo pipefail
. "$(dirname "$0")/lib-bench.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/lib-debian.sh"
[ $# -eq 1 ] || die "usage: section-6-policies.sh OUTDIR"
[ -x "${KSTALED_AGENT:-}" ] || die "KSTALED_AGENT is not the agent binary"
out=$1
work=$out/section-6-policies
reps=${KSTALED_BENCH_REPS:-3}
pre_seconds=${KSTALED_BENCH_PRE_SECONDS:-60}
policy_seconds=${KSTALED_BENCH_POLICY_SECONDS:-240}
read -ra configs <<<"${KSTALED_BENCH_CONFIGS:-disk-swap no-swap}"
arms=(static-fpr mom proxmox kstaled-fpr)
mem_mib=1024 swap_mib=1024 sample_seconds=2 free_percent=12
thp=/sys/kernel/mm/transparent_hugepage
# selected_thp: the value selected in transparent_hugepage/enabled.
selected_thp() {
	sed 's/.*\[\(.*\)\].*/\1/' $thp/enabled
}
host_thp=$(selected_thp)
cgroup_root=/sys/fs/cgroup/memory
[ -d $cgroup_root ] || die "no cgroup v1 memory hierarchy at $cgroup_root"
cgroup=$cgroup_root/kstaled-bench

# The workloads, run in the guest.  fill-disk-swap: 256 MiB of redis
# values, 2048 B of random base64 and a pad each (zram would compress them
# about 2:1), named as redis-benchmark -r picks keys.  load-disk-swap:
# redis-benchmark GETs over the hot set in /run/bench-hot, one line of
# its size and p99 latency per batch.  For no-swap: a 384 MiB
# file, read (4 MiB at a time, direct from the guest's page cache) over the
# hot MiB in /run/bench-hot.
keys=65536 value_bytes=4092
fill_disk_swap="pad=\$(printf '%$((value_bytes - 2048))s' '' | tr ' ' x)
head -c $((keys * 1536)) /dev/urandom | base64 -w 2048 |
	awk -v pad=\"\$pad\" '{ printf \"SET key:%012d %s%s\\r\\n\", NR - 1, \$0, pad }' |
	redis-cli --pipe >/dev/null
[ \"\$(redis-cli DBSIZE)\" -eq $keys ]"
# shellcheck disable=SC2016 # expanded in the guest
load_disk_swap='while :; do
	redis-benchmark -t get -r "$(cat /run/bench-hot)" -n 2000 -c 4 --csv 2>/dev/null |
		awk -F\" -v t="$(date +%s)" "\$2 == \"GET\" { print t, 2000, \$14 }"
done >>/run/bench-ops'
fill_no_swap='head -c 384M /dev/urandom >/root/bench.db && cat /root/bench.db >/dev/null'
# shellcheck disable=SC2016 # expanded in the guest
load_no_swap='while :; do
	t0=$(date +%s%N)
	dd if=/root/bench.db of=/dev/null bs=4M count=1 skip=$((RANDOM % ($(cat /run/bench-hot) / 4))) 2>/dev/null
	echo "$(date +%s) 4 $((($(date +%s%N) - t0) / 1000000))"
done >>/run/bench-ops'
# The guest's paging counters every 2 s.
# shellcheck disable=SC2016 # expanded in the guest
sampler='while :; do
	echo "$(date +%s)" $(awk "/^(pswpin|pswpout|workingset_refault_anon|workingset_refault_file|oom_kill) / {
		print \$1 \"=\" \$2 }" /proc/vmstat)
	sleep 2
done >>/run/bench-vmstat'

# guest_script NAME FILE SCRIPT: SCRIPT written to FILE in guest NAME.
guest_script() {
	guest_sh "$1" "echo $(base64 -w0 <<<"$3") | base64 -d >$2" >/dev/null ||
		die "cannot write $2 in $1"
}

# wait_all MESSAGE: wait for every background job; die with MESSAGE if
# one failed.
wait_all() {
	local pid
	for pid in $(jobs -p); do
		wait "$pid" || die "$1"
	done
}

# arm_mode ARM: the agent's policy= for ARM.
arm_mode() {
	case "$1" in
	static-fpr) echo static ;;
	kstaled-fpr) echo kstaled ;;
	*) echo "$1" ;;
	esac
}

agent_pids=()
guests=()
cleanup() {
	local g pid
	for pid in "${agent_pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for g in "${guests[@]}"; do
		debian_destroy "$g"
	done
	pid=$(pgrep -xo libvirtd) && echo "$pid" >$cgroup_root/cgroup.procs
	libvirt_stop
	for g in "$cgroup"/*/; do
		[ -d "$g" ] || continue
		while read -r pid; do
			echo "$pid" >$cgroup_root/cgroup.procs 2>/dev/null || true
		done <"$g/cgroup.procs"
		rmdir "$g" 2>/dev/null || true
	done
	[ ! -d "$cgroup" ] || rmdir "$cgroup" 2>/dev/null || true
	echo "$host_thp" >$thp/enabled
}
trap cleanup EXIT

# The host is set up for ballooning as docs/balloon-policy.md says: with
# transparent huge pages a balloon's 4 KiB holes free nothing.
echo never >$thp/enabled
libvirt_start
mkdir -p "$cgroup"
rm -rf "$work"
log "policies: ${configs[*]}; arms ${arms[*]}; $reps repetitions of $pre_seconds + $policy_seconds s"

# run_rep CONFIG REP DIR: one repetition of CONFIG, its raw data in DIR.
run_rep() {
	local config=$1 rep=$2 dir=$3 i arm g slot pid cg budget start t touched jumped=0
	local -A guest_of
	guests=()
	for i in "${!arms[@]}"; do
		# Each repetition moves every arm to the next slot.
		slot=$(((i + rep) % ${#arms[@]}))
		arm=${arms[$i]} g=kstaled-bench-$slot
		guest_of[$arm]=$g
		guests+=("$g")
		mkdir -p "$dir/$arm"
	done
	# Each arm's QEMU in a memory cgroup of its own from its first page
	# (the host's 6.x kernel no longer moves charges between v1 cgroups):
	# libvirtd starts it from there, and goes back to the root after.
	local libvirtd_pid logs=()
	libvirtd_pid=$(pgrep -xo libvirtd) || die "no libvirtd process"
	for arm in "${arms[@]}"; do
		local device=() fpr=
		case "$arm" in *-fpr) fpr=on ;; esac
		case "$arm" in kstaled-*) ;; *) device=(--without-kstaled) ;; esac
		mkdir -p "$cgroup/$arm"
		echo "$libvirtd_pid" >"$cgroup/$arm/cgroup.procs"
		logs+=("$(KSTALED_BALLOON_FREE_PAGE_REPORTING=$fpr KSTALED_DEBIAN_DISK_CACHE=none \
			KSTALED_DEBIAN_SWAP_MIB=$([ "$config" = disk-swap ] && echo $swap_mib) \
			KSTALED_SCAN_SECONDS=2 debian_start "${device[@]}" "${guest_of[$arm]}" $mem_mib)")
	done
	echo "$libvirtd_pid" >$cgroup_root/cgroup.procs
	for i in "${!arms[@]}"; do
		debian_wait_booted "${guest_of[${arms[$i]}]}" "${logs[$i]}" &
	done
	wait_all "a guest did not boot"
	for arm in "${arms[@]}"; do
		g=${guest_of[$arm]}
		pid=$(domain_qemu_pid "$g")
		grep -qx "$pid" "$cgroup/$arm/cgroup.procs" || die "$g's QEMU is not in $cgroup/$arm"
		echo "$pid" >"$dir/$arm/qemu.pid"
		echo "$g" >"$dir/$arm/guest"
		guest_sh "$g" "swapoff -a$([ "$config" = disk-swap ] && echo '; mkswap -q /dev/vdb && swapon /dev/vdb')" >/dev/null ||
			die "cannot set up $g's swap"
		case "$arm" in
		kstaled-*) ;;
		*)
			[ "$(guest_sh "$g" 'cat /sys/kernel/mm/kstaled/scan_seconds')" = 0 ] ||
				die "kstaled scans in $g, a baseline's guest"
			;;
		esac
	done
	# A long-running guest has touched all of its memory, and keeps what
	# it does not use as page cache, long cold: here a file written once,
	# by a process of a cgroup that lives on (the guest agent's), as the
	# cache of a deleted cgroup does not reach the host (issue 29).
	local -A touched_kib
	local touch_pids=() touching=1
	for arm in "${arms[@]}"; do
		guest_sh "${guest_of[$arm]}" "dd if=/dev/zero of=/root/bench-cold bs=1M count=$((mem_mib - 320)) 2>/dev/null" 300 >/dev/null &
		touch_pids+=($!)
	done
	# The most the host held for each while the guest touched it.
	while [ $touching = 1 ]; do
		touching=0
		for pid in "${touch_pids[@]}"; do
			! kill -0 "$pid" 2>/dev/null || touching=1
		done
		for arm in "${arms[@]}"; do
			read -r touched _ < <(qemu_rss_kib "$(cat "$dir/$arm/qemu.pid")" $mem_mib)
			[ "$touched" -le "${touched_kib[$arm]:-0}" ] || touched_kib[$arm]=$touched
		done
		sleep 1
	done
	wait_all "touching guest memory failed"
	for arm in "${arms[@]}"; do
		g=${guest_of[$arm]} touched=${touched_kib[$arm]}
		echo "$touched" >"$dir/$arm/touched-kib"
		[ "$touched" -ge $((mem_mib * 1024 * 80 / 100)) ] ||
			die "$g's QEMU held at most $touched KiB of its $mem_mib MiB while the guest touched it"
		if [ "$config" = disk-swap ]; then
			guest_script "$g" /root/bench-fill.sh "$fill_disk_swap"
			guest_script "$g" /root/bench-load.sh "$load_disk_swap"
			echo 6554 >"$dir/$arm/hot"
		else
			guest_script "$g" /root/bench-fill.sh "$fill_no_swap"
			guest_script "$g" /root/bench-load.sh "$load_no_swap"
			echo 32 >"$dir/$arm/hot"
		fi
		guest_script "$g" /root/bench-vmstat.sh "$sampler"
		guest_sh "$g" 'sh /root/bench-fill.sh' 900 >/dev/null &
	done
	wait_all "filling the workload failed"
	for arm in "${arms[@]}"; do
		g=${guest_of[$arm]}
		guest_sh "$g" "echo $(cat "$dir/$arm/hot") >/run/bench-hot &&
			systemd-run --unit=bench-load sh /root/bench-load.sh &&
			systemd-run --unit=bench-vmstat sh /root/bench-vmstat.sh" >/dev/null ||
			die "cannot start the load in $g"
	done

	# The host's samples, from the start of the pre-policy window.
	start=$(date +%s)
	for arm in "${arms[@]}"; do
		printf 't\tguest-ram-kib\tqemu-own-kib\tballoon-kib\tcgroup-kib\trss-kib\tcache-kib\tinactive-file-kib\n' \
			>"$dir/$arm/host.tsv"
	done
	local policy_at=$((pre_seconds)) jump_at=$((pre_seconds + policy_seconds / 2))
	local end_at=$((pre_seconds + policy_seconds)) pswpout0
	pswpout0=$(awk '$1 == "pswpout" { print $2 }' /proc/vmstat)
	agent_pids=()
	while t=$(($(date +%s) - start)) && [ "$t" -lt "$end_at" ]; do
		if [ ${#agent_pids[@]} -eq 0 ] && [ "$t" -ge "$policy_at" ]; then
			for arm in "${arms[@]}"; do
				cg=$cgroup/$arm
				budget=$(($(cat "$cg/memory.usage_in_bytes") * 100 / (100 - free_percent)))
				echo "$budget" >"$cg/memory.soft_limit_in_bytes"
				echo "$budget" >"$dir/$arm/budget-bytes"
				{
					printf '[agent]\nuri=%s\npoll-interval=10\nballoon-stats-period=2\n' "$LIBVIRT_URI"
					printf 'state-file=%s\nhost-memory=%s\n' "$dir/$arm/state.json" "$cg"
					printf '[policy]\nenabled=false\npolicy=%s\nmin-memory-mib=256\n' "$(arm_mode "$arm")"
					printf 'swap-backed-reclaim-percent=%s\n' "$([ "$config" = disk-swap ] && echo 100 || echo 0)"
					# kstaled's settings for 1 GiB guests and 4-minute
					# runs: 2 s scans (cold after 60 s, long cold
					# after 240 s), 64 MiB steps.
					printf 'scan-seconds=2\ncold-age=60\nmin-cold-age=30\nrelaxed-cold-age=240\nmax-step-mib=64\n'
					printf '[domain %s]\nenabled=true\n' "${guest_of[$arm]}"
				} >"$dir/$arm/agent.conf"
				"$KSTALED_AGENT" --config "$dir/$arm/agent.conf" --verbose >"$dir/$arm/agent.log" 2>&1 &
				agent_pids+=($!)
			done
			echo "$(($(date +%s) - start))" >"$dir/policy-start"
		fi
		if [ $jumped = 0 ] && [ "$t" -ge "$jump_at" ]; then
			for arm in "${arms[@]}"; do
				local hot
				hot=$([ "$config" = disk-swap ] && echo 39322 || echo 128)
				guest_sh "${guest_of[$arm]}" "echo $hot >/run/bench-hot" >/dev/null ||
					die "cannot change ${guest_of[$arm]}'s hot set"
			done
			echo "$(($(date +%s) - start))" >"$dir/jump"
			jumped=1
		fi
		for arm in "${arms[@]}"; do
			local ram own balloon stat
			read -r ram own < <(qemu_rss_kib "$(cat "$dir/$arm/qemu.pid")" $mem_mib) ||
				die "${guest_of[$arm]}'s QEMU is gone"
			balloon=$(domain_kib "${guest_of[$arm]}" actual)
			stat=$(awk '$1 == "total_rss" { r = $2 } $1 == "total_cache" { c = $2 }
				$1 == "total_inactive_file" { i = $2 } END { printf "%d\t%d\t%d", r / 1024, c / 1024, i / 1024 }' \
				"$cgroup/$arm/memory.stat")
			printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$ram" "$own" "$balloon" \
				$(($(cat "$cgroup/$arm/memory.usage_in_bytes") >> 10)) "$stat" >>"$dir/$arm/host.tsv"
		done
		for pid in "${agent_pids[@]}"; do
			kill -0 "$pid" 2>/dev/null || die "an agent exited during the run; logs in $dir"
		done
		sleep $sample_seconds
	done
	for pid in "${agent_pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	agent_pids=()
	for arm in "${arms[@]}"; do
		g=${guest_of[$arm]}
		# A guest the host killed has no samples: the report says so.
		guest_sh "$g" 'cat /run/bench-ops' >"$dir/$arm/ops" || log "policies: no ops from $g"
		guest_sh "$g" 'cat /run/bench-vmstat' >"$dir/$arm/vmstat" || true
		guest_oom_kills "$g" >"$dir/$arm/oom" || true
		debian_destroy "$g"
		rmdir "$cgroup/$arm" 2>/dev/null || true
	done
	jq -n --argjson start "$start" --argjson pre "$pre_seconds" --argjson policy "$policy_seconds" \
		--argjson mem_kib $((mem_mib * 1024)) --arg config "$config" --arg host_thp "$(selected_thp)" \
		--argjson host_swap_out $(($(awk '$1 == "pswpout" { print $2 }' /proc/vmstat) - pswpout0)) \
		'{config: $config, start: $start, "pre-seconds": $pre, "policy-seconds": $policy,
		  "mem-kib": $mem_kib, "host-thp": $host_thp, "host-swap-out-pages": $host_swap_out}' \
		>"$dir/run.json"
}

for config in "${configs[@]}"; do
	case "$config" in
	disk-swap | no-swap) ;;
	*) die "unknown configuration $config (disk-swap, no-swap)" ;;
	esac
	for rep in $(seq "$reps"); do
		log "policies: $config, repetition $rep of $reps"
		run_rep "$config" "$rep" "$work/$config/$rep"
	done
done
/usr/bin/python3 "$KSTALED_TOP/bench/policies.py" "$work" >"$out/section-6-policies.json"
