#!/bin/bash
# Checks docs/monitoring/ against Prometheus' own tools and the agent's real
# metrics: promtool (Debian's prometheus package) checks and unit-tests the
# alerting rules, checks the dashboard's queries as PromQL, and lints a real
# scrape of the agent; every kstaled_* name the rules and the dashboard use
# must be one the agent exports.
# Usage: test-monitoring.sh KSTALED-AGENT SOURCE-ROOT
set -euo pipefail

agent=$1 top=$2
docs=$top/docs/monitoring
die() { echo "test-monitoring: $*" >&2; exit 1; }

# promtool: on PATH when the prometheus package is installed, else unpacked
# from its .deb into the cache by scripts/setup-host.sh.
promtool=$(command -v promtool || true)
[ -n "$promtool" ] || promtool=${KSTALED_CACHE:-/var/cache/kstaled-vm}/prometheus/usr/bin/promtool
if [ ! -x "$promtool" ]; then
	echo "no promtool (Debian's prometheus package; scripts/setup-host.sh unpacks it)" >&2
	exit 1
fi
echo "using $("$promtool" --version 2>&1 | head -1)"

work=$(mktemp -d /var/tmp/kstaled-monitoring.XXXXXX)
agent_pid=
cleanup() {
	[ -z "$agent_pid" ] || { kill "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null; } || true
	rm -rf "$work"
}
trap cleanup EXIT

# The rules: syntax, then their behaviour on series that must (and must not)
# fire each alert.
"$promtool" check rules "$docs/kstaled-alerts.yml"
cp "$docs/kstaled-alerts.yml" "$top/host-agent/tests/kstaled-alerts-test.yml" "$work/"
(cd "$work" && "$promtool" test rules kstaled-alerts-test.yml)

# The dashboard: valid JSON, unique panel ids, and every query valid PromQL
# once Grafana's variables are replaced (checked as recording rules).
jq -e '[.panels[].id] | length == (unique | length)' "$docs/kstaled-dashboard.json" >/dev/null ||
	die "the dashboard's panel ids are not unique"
jq -r '.panels[].targets[]?.expr' "$docs/kstaled-dashboard.json" >"$work/queries"
[ -s "$work/queries" ] || die "the dashboard has no queries"
{
	echo "groups:"
	echo "  - name: dashboard"
	echo "    rules:"
	n=0
	while IFS= read -r q; do
		n=$((n + 1))
		q=${q//\$__rate_interval/5m}
		q=${q//\$instance/.*}
		q=${q//\$domain/.*}
		q=${q//\$kind/.*}
		printf '      - record: dashboard:query%d\n        expr: %s\n' "$n" "$(jq -Rn --arg q "$q" '$q')"
	done <"$work/queries"
} >"$work/dashboard-rules.yml"
"$promtool" check rules "$work/dashboard-rules.yml" >/dev/null ||
	die "a dashboard query is not valid PromQL: $("$promtool" check rules "$work/dashboard-rules.yml" 2>&1)"
echo "dashboard: $(wc -l <"$work/queries") queries parse"

# A real scrape of the agent (libvirt's test driver: one domain, no device),
# with per-cgroup series on so that every family is there.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '[agent]\nuri=test:///default\nmetrics-port=%s\nmetrics-cgroups=4\nstate-file=%s/state.json\n' \
	"$port" "$work" >"$work/agent.conf"
"$agent" --config "$work/agent.conf" >"$work/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 50); do
	curl -sf "http://127.0.0.1:$port/metrics" >"$work/scrape" 2>/dev/null && break
	sleep 0.1
done
[ -s "$work/scrape" ] || die "no scrape from the agent; log: $(cat "$work/agent.log")"
lint=$("$promtool" check metrics <"$work/scrape" 2>&1) || die "promtool check metrics: $lint"
[ -z "$lint" ] || die "promtool check metrics: $lint"
echo "scrape: $(grep -c '^# TYPE' "$work/scrape") families, lint clean"

exported=$(sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$work/scrape" | sort -u)
used=$(cat "$docs/kstaled-alerts.yml" "$work/queries" | grep -o 'kstaled_[a-z_]*' | sort -u)
missing=$(comm -13 <(echo "$exported") <(echo "$used"))
[ -z "$missing" ] || die "the rules or the dashboard use metrics the agent does not export: $missing"
echo "ok: the rules and the dashboard use $(echo "$used" | wc -l) of the agent's $(echo "$exported" | wc -l) metric families"
