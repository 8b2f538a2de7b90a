#!/bin/bash
# A domain without a kstaled device is left alone, once and as a daemon,
# without a monitor command (libvirt would taint it), and the daemon
# survives what happens around it: a configuration reload,
# a libvirtd restart, the domain's QEMU killed under it, the domain
# starting again.  The baseline policies, which read only the balloon,
# manage such a domain, without a monitor command either.
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh"

domain=kstaled-agent-nodev
trap 'agent_cleanup $?; domain_destroy $domain; libvirt_stop' EXIT
libvirt_start
agent_config --domains "$domain"

log_mark=$(domain_log_mark "$domain")
console=$(domain_start --without-kstaled "$domain" 512 "")
wait_for_file_line "$console" '^KSTALED-VM-READY' 120 ||
	die "guest did not boot; console:
$(cat "$console")"
full=$(domain_kib "$domain" actual)

"$agent_bin" --config "$agent_conf" --once >"$agent_log" 2>&1 ||
	die "kstaled-agent --once failed: $(cat "$agent_log")"
cat "$agent_log"
grep -q "domain=$domain has no kstaled device in its XML; leaving it alone" "$agent_log" ||
	die "--once did not report $domain as left alone"
! grep -q "domain=$domain action=" "$agent_log" ||
	die "--once decided about a domain without the device"
jq -e --arg d "$domain" '.domains[] | select(.name == $d) | .device == "absent"' \
	"$agent_state" >/dev/null || die "state file lacks $domain as absent: $(cat "$agent_state")"
"$ctl_bin" --state-file "$agent_state" | tee "$agent_dir/table"
grep -qE "^$domain +absent " "$agent_dir/table" || die "kstaled-ctl does not list $domain"
"$ctl_bin" --state-file "$agent_state" --json | jq -e '.version == 2' >/dev/null

# MOM's rules need no device: the domain is managed.
agent_config --domains "$domain" policy=mom
"$agent_bin" --config "$agent_conf" --once >"$agent_log" 2>&1 ||
	die "kstaled-agent --once failed: $(cat "$agent_log")"
grep -q "domain=$domain has no kstaled device in its XML; policy=mom needs none" "$agent_log" ||
	die "--once did not manage $domain under policy=mom: $(cat "$agent_log")"
grep -qE "domain=$domain action=[a-z]+ reason=[a-z-]+ .* mode=mom " "$agent_log" ||
	die "--once made no mom decision about $domain: $(cat "$agent_log")"
jq -e --arg d "$domain" '.domains[] | select(.name == $d) | .device == "not-needed"' \
	"$agent_state" >/dev/null || die "state file lacks $domain as not-needed: $(cat "$agent_state")"
agent_config --domains "$domain"

# As a daemon, with metrics on a free port.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
: >"$agent_log"
agent_start --metrics-port "$port"
agent_wait_log 1 "connected to $LIBVIRT_URI" 20
agent_wait_log 1 "domain=$domain has no kstaled device" 20
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || die "no metrics on port $port"
echo "$metrics" | grep -qx "kstaled_domain_managed{domain=\"$domain\"} 0" ||
	die "metrics do not show $domain as unmanaged: $metrics"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/other")" = 404 ] ||
	die "metrics endpoint answers other paths"

# SIGHUP reloads the configuration; a broken one is refused.
agent_config --domains ""
kill -HUP "$agent_pid"
agent_wait_log 1 "reloaded $agent_conf" 10
agent_wait_log 1 "domain=$domain is disabled in the configuration" 10
echo '[domain' >"$agent_conf"
kill -HUP "$agent_pid"
agent_wait_log 1 "keeping the old configuration: $agent_conf" 10
agent_config --domains "$domain"
kill -HUP "$agent_pid"
agent_wait_log 2 "reloaded $agent_conf" 10

libvirtd_restart
agent_wait_log 2 "connected to $LIBVIRT_URI" 60
# The same run of the domain: known already, not logged again.
sleep 3
[ "$(grep -c "domain=$domain has no kstaled device" "$agent_log")" -eq 1 ] ||
	die "the agent logged $domain more than once: $(cat "$agent_log")"

# The domain's QEMU dies under the agent.
pid=$(cat "/run/libvirt/qemu/$domain.pid")
kill -9 "$pid"
agent_wait_log 1 "domain=$domain stopped" 30
agent_alive || die "agent died with the domain"
curl -sf "http://127.0.0.1:$port/metrics" | grep -q "domain=\"$domain\"" &&
	die "metrics still list the dead domain"

# It comes back: the agent notices at once and leaves it alone again.
console=$(domain_start --without-kstaled "$domain" 512 "")
agent_wait_log 1 "domain=$domain started" 30
agent_wait_log 2 "domain=$domain has no kstaled device" 30
wait_for_file_line "$console" '^KSTALED-VM-READY' 120 || die "guest did not boot again"
sleep 2
[ "$(domain_kib "$domain" actual)" -eq "$full" ] ||
	die "balloon of $domain moved to $(domain_kib "$domain" actual) KiB"
! grep -q "domain=$domain action=" "$agent_log" ||
	die "the agent decided about a domain without the device"
if domain_log_since "$domain" "$log_mark" | grep custom-monitor; then
	die "the agent sent $domain a monitor command"
fi
agent_stop
grep -q "exiting on signal" "$agent_log" || die "agent did not exit cleanly on SIGTERM"
cat "$agent_log"
echo "left alone, untainted, through --once, a libvirtd restart, a QEMU kill and a restart"
