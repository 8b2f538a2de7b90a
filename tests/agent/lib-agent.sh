# Helpers for the agent's integration tests; sourced after scripts/lib.sh
# and tests/lib-libvirt.sh.  The test scripts get the agent and kstaled-ctl
# binaries as their first two arguments.
# shellcheck shell=bash

agent_bin=$1
ctl_bin=$2
{ [ -x "$agent_bin" ] && [ -x "$ctl_bin" ]; } ||
	die "usage: $0 KSTALED-AGENT KSTALED-CTL"
agent_dir=$(mktemp -d /var/tmp/kstaled-agent-test.XXXXXX)
agent_log=$agent_dir/agent.log
agent_state=$agent_dir/state.json
agent_conf=$agent_dir/agent.conf
agent_pid=

# agent_config [--domains LIST] [KEY=VALUE...]: a configuration that
# polls every second; the KEY=VALUE lines go to [policy].  With --domains
# only the domains in the space-separated LIST are managed: libvirtd is
# shared, and other tests' guests are not a test's to balloon.  The test
# host has memory to spare, which would leave the guests their memory
# cold for less than host-relaxed-cold-age: host-low-percent=100 makes the
# host arbiter (reading the real /proc/meminfo) count it as short.
agent_config() {
	local domains="" all=true d
	if [ "${1:-}" = --domains ]; then
		domains=$2 all=false
		shift 2
	fi
	{
		# metrics-cgroups: the tests check the metrics of their
		# guests' /work cgroup.
		printf '[agent]\nuri=%s\npoll-interval=1\nballoon-stats-period=1\nstate-file=%s\nmetrics-cgroups=4\nhost-low-percent=100\n' \
			"$LIBVIRT_URI" "$agent_state"
		printf '[policy]\nenabled=%s\n' "$all"
		printf '%s\n' "$@"
		for d in $domains; do
			printf '[domain %s]\nenabled=true\n' "$d"
		done
	} >"$agent_conf"
}

# agent_start [ARGS...]: the daemon in the background, logging to
# $agent_log (appended, so restarts keep one log).
agent_start() {
	: >>"$agent_log"	# the background job opens it only when it runs
	"$agent_bin" --config "$agent_conf" --verbose "$@" >>"$agent_log" 2>&1 &
	agent_pid=$!
}

agent_stop() {
	[ -n "$agent_pid" ] || return 0
	kill "$agent_pid" 2>/dev/null || true
	wait "$agent_pid" 2>/dev/null || true
	agent_pid=
}

agent_alive() {
	[ -n "$agent_pid" ] && kill -0 "$agent_pid" 2>/dev/null
}

# agent_wait_log COUNT PATTERN SECONDS: wait until the log has COUNT lines
# matching the extended regex PATTERN; dies with the log if not, or if the
# agent exits meanwhile.
agent_wait_log() {
	local count=$1 pattern=$2 deadline=$((SECONDS + $3))
	[ -f "$agent_log" ] || die "no agent log $agent_log"
	while [ "$(grep -cE -- "$pattern" "$agent_log")" -lt "$count" ]; do
		[ -z "$agent_pid" ] || agent_alive ||
			die "agent exited while waiting for \"$pattern\"; log:
$(cat "$agent_log")"
		[ $SECONDS -lt "$deadline" ] ||
			die "no $count lines \"$pattern\" in the agent log after $3 s; log:
$(cat "$agent_log")"
		sleep 0.2
	done
}

# wait_balloon DOMAIN TEST KIB SECONDS: wait until DOMAIN's balloon
# ("actual") passes [ ACTUAL TEST KIB ] (TEST: -le, -eq, ...); dies with
# the agent log if it does not within SECONDS.
wait_balloon() {
	local deadline=$((SECONDS + $4))
	until [ "$(domain_kib "$1" actual)" "$2" "$3" ]; do
		[ $SECONDS -lt $deadline ] ||
			die "$1's balloon at $(domain_kib "$1" actual) KiB after $4 s, not $2 $3 KiB; agent log:
$(cat "$agent_log")"
		sleep 0.2
	done
}

# libvirtd_restart: stop the running libvirtd (whoever started it) and
# start a new one; domains keep running, as they do on a real upgrade.
libvirtd_restart() {
	local pid=$libvirt_started_pid pidfile
	for pidfile in "$KSTALED_CACHE/libvirtd.pid" /run/libvirtd.pid; do
		[ -n "$pid" ] || pid=$(cat "$pidfile" 2>/dev/null) || true
	done
	[ -n "$pid" ] || die "cannot find the running libvirtd's pid"
	kill "$pid"
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	! kill -0 "$pid" 2>/dev/null || die "libvirtd $pid did not stop"
	if [ -n "$libvirt_started_pid" ]; then
		libvirt_started_pid=
		libvirt_start
	else
		# Someone else's libvirtd: the new one outlives this test too.
		libvirt_start
		libvirt_started_pid=
	fi
}

# agent_cleanup STATUS: stop the agent, print its log if the test failed,
# and remove the test's files.
agent_cleanup() {
	agent_stop
	if [ "$1" -ne 0 ] && [ -s "$agent_log" ]; then
		echo "agent log:"
		cat "$agent_log"
	fi >&2
	rm -rf "$agent_dir"
}

# log_ms LINE: the GLib log timestamp (HH:MM:SS.mmm) of LINE in ms: the
# first such time in it, as messages and warnings put it at different
# places.
log_ms() {
	echo "$1" | grep -oE -m1 '[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}' | head -1 |
		awk -F'[:.]' '{ print (($1 * 60 + $2) * 60 + $3) * 1000 + $4 }'
}

# guest_healthy NAME CONSOLE: the guest's kernel killed nothing for lack
# of memory.
guest_healthy() {
	if grep -E 'Out of memory|oom-kill|Killed process|invoked oom-killer' "$2"; then
		die "$1 ran out of memory; console:
$(tail -50 "$2")"
	fi
}

# domain_log_mark NAME: the size of libvirt's log of domain NAME now, for
# domain_log_since.
domain_log_mark() {
	stat -c %s "/var/log/libvirt/qemu/$1.log" 2>/dev/null || echo 0
}

# domain_log_since NAME MARK: what libvirt logged about domain NAME since
# domain_log_mark gave MARK (it appends across runs of the domain).
domain_log_since() {
	tail -c +$(($2 + 1)) "/var/log/libvirt/qemu/$1.log"
}
