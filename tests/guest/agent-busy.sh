# Guest workload of the agent tests: 200 MiB allocated and all of it hot,
# so there is nothing for the agent to take.  Never exits by itself.
mkdir -p /sys/fs/cgroup/work
memload --cgroup /sys/fs/cgroup/work --size 200 --hot 200 --dirty
