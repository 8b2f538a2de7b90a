# Guest workload of the agent's pressure test: anonymous memory that wakes
# up.  memload dirties 200 MiB and keeps 20 MiB of it hot; a zram swap
# device takes the idle part when the balloon squeezes the guest.  After
# kstaled_vm.idle_seconds (default 60) it touches all 200 MiB once, which
# swaps the squeezed part back in, and keeps running.  Anonymous memory
# is never stale, so the guest sends no early report for it.
. /guest/lib-kstaled.sh
idle_seconds=$(cmdline_param kstaled_vm.idle_seconds 60)
zram_swap 300M
mkdir -p /sys/fs/cgroup/work
memload --cgroup /sys/fs/cgroup/work --size 200 --hot 20 --dirty &
pid=$!
sleep "$idle_seconds"
echo "agent-swap: touching all memory"
kill -USR1 $pid
wait $pid
