#!/bin/bash
# One stuck QEMU must not stall the agent.  Three guests with the device;
# one's QEMU is stopped (kill -STOP: its monitor never answers, as with a
# big lock held by stuck storage).  The agent marks it unresponsive and
# keeps polling and ballooning the other two, its metrics endpoint answers,
# and after kill -CONT it manages the third again.  Then it is stopped with
# four more QEMUs that sit in their firmware: five calls stuck in libvirtd
# at once, which on one shared connection (max_client_requests is 5) would
# stop libvirtd reading the healthy domains' calls.  The five stopped do
# not keep SIGTERM from ending the agent within 5 s; and when domains
# answer while the agent exits, the agent still exits cleanly.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"

guests="kstaled-agent-stuck1 kstaled-agent-stuck2 kstaled-agent-stuck3"
healthy="kstaled-agent-stuck1 kstaled-agent-stuck2"
stuck=kstaled-agent-stuck3
idle="kstaled-agent-stuck4 kstaled-agent-stuck5 kstaled-agent-stuck6 kstaled-agent-stuck7"
stopped_pids=()
cleanup() {
	local status=$1 g
	[ ${#stopped_pids[@]} -eq 0 ] || kill -CONT "${stopped_pids[@]}" 2>/dev/null || true
	agent_cleanup "$status"
	for g in $guests $idle; do domain_destroy "$g"; done
	libvirt_stop
}
trap 'cleanup $?' EXIT
libvirt_start
interval=2
# Idle guests shrink from 192 MiB towards the 64 MiB floor in 8 MiB steps:
# the two healthy ones still have steps to go while the third is stopped.
agent_config --domains "$guests $idle" scan-seconds=1 cold-age=5 min-cold-age=5 headroom-percent=0 headroom-mib=16 \
	min-memory-mib=64 hysteresis-mib=8 hysteresis-percent=0 max-step-mib=8 \
	swap-backed-reclaim-percent=100
sed -i "s/^poll-interval=.*/poll-interval=$interval/" "$agent_conf"

declare -A console
for g in $guests; do
	console[$g]=$(domain_start "$g" 192 "")
done
# With the device but no kernel: SeaBIOS finds nothing to boot and waits.
for g in $idle; do
	xml=$(mktemp)
	fill_domain kstaled-domain.xml "$g" 64 "$KSTALED_CACHE/console-$g.log" \
		-e '/<kernel>/d' -e '/<initrd>/d' -e '/<cmdline>/d' >"$xml"
	virsh_ create "$xml" >/dev/null || die "virsh create $g failed"
	rm -f "$xml"
done
for g in $guests; do
	wait_for_file_line "${console[$g]}" '^KSTALED-VM-READY' 120 ||
		die "$g did not boot; console:
$(cat "${console[$g]}")"
done

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
agent_start --metrics-port "$port"
for g in $guests; do
	agent_wait_log 1 "domain=$g action=inflate" 120
done

# now_ms: the time of day in ms, as log_ms reads the agent's log.
now_ms() {
	log_ms "now: $(date +%H:%M:%S.%3N): now"
}

# stop DOMAIN...: kill -STOP their QEMUs.
stop() {
	local g pid
	for g in "$@"; do
		pid=$(cat "/run/libvirt/qemu/$g.pid")
		kill -STOP "$pid"
		stopped_pids+=("$pid")
	done
}

# expect_managed FROM START_MS WHAT: for 4 intervals more, the healthy
# domains get a decision at least every 2 intervals from START_MS on (gaps
# from it, between decisions and to the end); $window is the agent's log
# after its line FROM.
expect_managed() {
	local from=$1 start_ms=$2 what=$3 end_ms g decided max_gap
	sleep $((4 * interval))
	window=$(tail -n +"$((from + 1))" "$agent_log")
	end_ms=$(now_ms)
	for g in $healthy; do
		decided=$(echo "$window" | grep "domain=$g action=" || true)
		max_gap=$({
			echo "$start_ms"
			echo "$decided" | while IFS= read -r line; do
				[ -z "$line" ] || log_ms "$line"
			done
			echo "$end_ms"
		} | awk 'NR > 1 && $1 - prev > max { max = $1 - prev } { prev = $1 } END { print max + 0 }')
		echo "$g while $what: $(echo "$decided" | grep -c . || true) decisions, $(echo "$decided" | grep -cE "action=(inflate|deflate)" || true) balloon changes, longest gap $max_gap ms"
		# 250 ms for timers and TCG guests on a busy host.
		[ "$max_gap" -le $((2 * interval * 1000 + 250)) ] ||
			die "$g went $max_gap ms without a decision while $what"
	done
}

from=$(wc -l <"$agent_log")
stopped_ms=$(now_ms)
stop "$stuck"
agent_wait_log 1 "domain=$stuck is unresponsive" 30
detected=$(grep -m1 "domain=$stuck is unresponsive" "$agent_log")
echo "$detected"
echo "stopped to unresponsive: $(($(log_ms "$detected") - stopped_ms)) ms"
expect_managed "$from" "$stopped_ms" "$stuck was stopped"
for g in $healthy; do
	echo "$window" | grep -qE "domain=$g action=(inflate|deflate)" ||
		die "$g was not ballooned while $stuck was stopped:
$(echo "$window" | grep "domain=$g action=")"
done
start_ms=$(date +%s%3N)
curl -sf -m 5 "http://127.0.0.1:$port/metrics" >"$agent_dir/metrics" ||
	die "/metrics did not answer while $stuck was stopped"
echo "/metrics answered in $(($(date +%s%3N) - start_ms)) ms"
grep -x "kstaled_domain_managed{domain=\"${healthy%% *}\"} 1" "$agent_dir/metrics" >/dev/null ||
	die "the metrics lack ${healthy%% *}: $(head -30 "$agent_dir/metrics")"
decisions=$(grep -c "domain=$stuck action=" "$agent_log")
! echo "$window" | grep "domain=$stuck action=" ||
	die "the agent decided about $stuck while its QEMU was stopped"

# Answers again: managed again.
kill -CONT "${stopped_pids[@]}"
stopped_pids=()
continued=$(date +%s%3N)
agent_wait_log 1 "domain=$stuck answers again" 30
agent_wait_log $((decisions + 1)) "domain=$stuck action=" 30
echo "$stuck managed again $(($(date +%s%3N) - continued)) ms after kill -CONT"
grep "domain=$stuck answers again" "$agent_log"

# Five stopped: the healthy ones are still managed once all five are
# known to be unresponsive (until then, four of them hold the agent's
# four I/O threads).
stop "$stuck" $idle
agent_wait_log 2 "domain=$stuck is unresponsive" 30
for g in $idle; do
	agent_wait_log 1 "domain=$g is unresponsive" 30
done
echo "five domains stopped and unresponsive"
expect_managed "$(wc -l <"$agent_log")" "$(now_ms)" "five domains were stopped"

# Stopped, they still do not keep a SIGTERM from ending the agent at once.
start_ms=$(date +%s%3N)
kill "$agent_pid"
# wait returns when the agent exits; a watchdog kills it after 5 s.
(sleep 5 && kill -9 "$agent_pid") 2>/dev/null &
watchdog=$!
status=0
wait "$agent_pid" || status=$?
exit_ms=$(($(date +%s%3N) - start_ms))
kill "$watchdog" 2>/dev/null || true
agent_pid=
echo "SIGTERM to exit: $exit_ms ms, five domains stopped"
[ "$status" -eq 0 ] || die "the agent did not exit cleanly within 5 s of SIGTERM (status $status, $exit_ms ms)"
grep -q "exiting on signal" "$agent_log" || die "the agent did not log its exit"
kill -CONT "${stopped_pids[@]}"
stopped_pids=()

# Polls that come back while the agent exits are dropped, not finished
# on their workers beside the main thread freeing the agent (which crashed
# it one exit in four).  On each tick of the poll timer the agent lists the
# domains and polls them at once, and a poll takes 10-50 ms: a SIGTERM
# 15 ms after a tick finds polls in flight that come back during the exit.
# How late the agent sees the signal (forks, scheduling) is measured on
# each cycle and sent that much earlier on the next.
cycles=6 late_ms=0
for cycle in $(seq "$cycles"); do
	from=$(wc -l <"$agent_log")
	agent_start
	# The first listing is on connecting, the second on the timer's tick.
	agent_wait_log $(($(grep -c "listing job of" "$agent_log") + 2)) "listing job of" 30
	listed=$(tail -n +"$((from + 1))" "$agent_log" | grep "listing job of" | sed -n 2p)
	# Logged when it is back: the tick plus the time it ran.
	ran=$(echo "$listed" | sed -nE 's/.* ran ([0-9]+) ms.*/\1/p')
	tick_ms=$(($(log_ms "$listed") - ran + interval * 1000))
	# Signed, across midnight; a moment already past (this script was
	# slow on a busy host) moves to the next tick, rather than to the
	# same time tomorrow.
	wait_ms=$(((tick_ms + 15 - late_ms - $(now_ms) + 129600000) % 86400000 - 43200000))
	while [ "$wait_ms" -lt 0 ]; do
		tick_ms=$((tick_ms + interval * 1000))
		wait_ms=$((wait_ms + interval * 1000))
	done
	sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
	kill "$agent_pid"
	status=0
	wait "$agent_pid" || status=$?
	agent_pid=
	cycle_log=$(tail -n +"$((from + 1))" "$agent_log")
	[ "$status" -eq 0 ] ||
		die "cycle $cycle: the agent exited with status $status when SIGTERM came with polls in flight"
	! echo "$cycle_log" | grep -E "CRITICAL|ERROR" ||
		die "cycle $cycle: the agent logged an error during its exit"
	signalled_ms=$(log_ms "$(echo "$cycle_log" | grep "exiting on signal")")
	late_ms=$((late_ms + signalled_ms - tick_ms - 15))
	echo "cycle $cycle: SIGTERM seen $((signalled_ms - tick_ms)) ms after the tick"
done
echo "SIGTERM with polls in flight: $cycles clean exits"
