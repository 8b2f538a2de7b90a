# Helpers for the benchmark sections that run the host agent against
# guests under libvirt; sourced after bench/lib-bench.sh.
# shellcheck shell=bash
. "$KSTALED_TOP/tests/lib-libvirt.sh"
. "$KSTALED_TOP/tests/agent/lib-agent.sh" "$KSTALED_AGENT" "$KSTALED_CTL"
# The agent's log times are local; the host's clock readings below are UTC.
export TZ=UTC

# now_ms: the host's time of day in ms, comparable with log_ms.
now_ms() {
	echo $(($(date +%s%3N) % 86400000))
}

# console_value CONSOLE KEY: the last KEY=VALUE a bench-agent line printed.
console_value() {
	sed -nE "s/^bench-agent: .*\\b$2=([0-9]+).*/\\1/p" "$1" | tail -n 1
}
