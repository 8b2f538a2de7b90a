#!/usr/bin/python3
"""policies.py WORK POLICY...: the section fragment of
bench/section-6-policies.sh (see bench/report.py) from its runs'
raw data, WORK/POLICY/{run.json,host.tsv,schedule.tsv,agent.log,
GUEST.samples,GUEST.oom}, printed on stdout.

Per policy: memory given back (the guests' maxima less their balloons)
and what the VMs' cgroup holds on the host, each averaged over the run
and at its end, redis throughput relative to the static run, the
guests' swap-ins, refaults and OOM kills, the host's swap-outs and how
often the VMs' cgroup hit its limit, balloon reversals (an agent request
in the other direction than the last), and the time from each jump of a
working set until the guest stops swapping in (the guest has the memory
again).
"""
import json
import os
import re
import sys

# Swap-ins per second under which a guest is taken to have its working
# set in memory again.
CALM_SWAP_IN_RATE = 64
ACTION = re.compile(r"domain=(\S+) action=(inflate|deflate) ")


def read_tsv(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        return header, [line.rstrip("\n").split("\t") for line in f if line.strip()]


def read_samples(path, start):
    """[(seconds since the run's start, {counter: value})] of a guest."""
    samples = []
    if not os.path.exists(path):
        return samples
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 2 or not fields[0].isdigit():
                continue
            values = dict(kv.split("=", 1) for kv in fields[1:] if "=" in kv)
            if not all(v.isdigit() for v in values.values()) or "commands" not in values:
                continue
            samples.append((int(fields[0]) - start, {k: int(v) for k, v in values.items()}))
    return samples


def growth(before, after):
    """How much a counter grew between two samples.  One that went down
    was restarted from zero: redis after the guest's OOM killer took it."""
    return after - before if after >= before else after


def delta(samples, key):
    if len(samples) < 2:
        return None
    return sum(growth(v0.get(key, 0), v1.get(key, 0))
               for (_, v0), (_, v1) in zip(samples, samples[1:]))


def average(series):
    """The mean value of a [[t, value], ...] series; None if empty."""
    return sum(v for _, v in series) / len(series) if series else None


def reversals(agent_log):
    """Balloon requests in the other direction than the domain's last."""
    last, count = {}, 0
    with open(agent_log) as f:
        for line in f:
            m = ACTION.search(line)
            if not m:
                continue
            domain, action = m.groups()
            if last.get(domain) not in (None, action):
                count += 1
            last[domain] = action
    return count


def seconds_to_memory(samples, jump_at):
    """Seconds from a working-set jump until the guest's swap-ins stay
    under CALM_SWAP_IN_RATE for two samples in a row; None if never."""
    after = [(t, v) for t, v in samples if t >= jump_at - 5]
    calm_since = None
    for (t0, v0), (t1, v1) in zip(after, after[1:]):
        rate = (v1.get("pswpin", 0) - v0.get("pswpin", 0)) / max(t1 - t0, 1)
        if rate < CALM_SWAP_IN_RATE:
            if calm_since is None:
                calm_since = t0
            elif t1 - calm_since >= 10:
                return max(calm_since - jump_at, 0)
        else:
            calm_since = None
    return None


def policy_run(work, policy):
    d = os.path.join(work, policy)
    with open(os.path.join(d, "run.json")) as f:
        run = json.load(f)
    header, rows = read_tsv(os.path.join(d, "host.tsv"))
    guests = header[1:-1]
    mem_mib = run["mem-kib"] / 1024
    given_back = []
    cgroup = []
    balloons = {g: [] for g in guests}
    for row in rows:
        t = int(row[0])
        cgroup.append([t, int(row[-1]) / 1024])
        actual = [int(v) if v else None for v in row[1:1 + len(guests)]]
        for g, a in zip(guests, actual):
            if a is not None:
                balloons[g].append([t, a / 1024])
        if None not in actual:
            given_back.append([t, sum(mem_mib - a / 1024 for a in actual)])
    _, schedule = read_tsv(os.path.join(d, "schedule.tsv"))
    samples = {g: read_samples(os.path.join(d, f"{g}.samples"), run["start"]) for g in guests}
    lost = [g for g in guests if len(samples[g]) < 2]

    hot = {}
    jumps = []
    working_set = {g: [] for g in guests}
    for t, g, keys in sorted(schedule, key=lambda r: int(r[0])):
        t, keys = int(t), int(keys)
        if g in hot and keys > hot[g]:
            jumps.append((g, t))
        hot[g] = keys
        mib = keys * run["value-bytes"] / 2**20
        if working_set[g]:
            working_set[g].append([t, working_set[g][-1][1]])
        working_set[g].append([t, mib])
    for g in guests:
        if working_set[g]:
            working_set[g].append([run["seconds"], working_set[g][-1][1]])

    def total(key):
        values = [delta(samples[g], key) for g in guests if g not in lost]
        return sum(values) if values else None

    to_memory = [seconds_to_memory(samples[g], t) for g, t in jumps if g not in lost]
    throughput = []
    for g in guests:
        s = samples[g]
        throughput += [[t1, growth(v0["commands"], v1["commands"]) / max(t1 - t0, 1), g]
                       for (t0, v0), (t1, v1) in zip(s, s[1:])]
    ops = [total("commands"), sum(s[-1][0] - s[0][0] for g, s in samples.items() if g not in lost)]
    return {
        "policy": policy,
        "given-back-avg-mib": average(given_back),
        "given-back-end-mib": given_back[-1][1] if given_back else None,
        "cgroup-avg-mib": average(cgroup),
        "cgroup-end-mib": cgroup[-1][1] if cgroup else None,
        # commands per guest-second, over the guests that survived
        "ops-per-second": ops[0] / (ops[1] / len(guests)) if ops[0] and ops[1] else None,
        "swap-ins": total("pswpin"),
        "refaults": (total("workingset_refault_anon") or 0) + (total("workingset_refault_file") or 0),
        "oom-kills": (total("oom_kill") or 0),
        "guests-lost": len(lost),
        "host-swap-out-pages": run["host-swap-out-pages"],
        "host-thp": run["host-thp"],
        "host-thp-faults": run["host-thp-faults"],
        "cgroup-failcnt": run["cgroup-failcnt"],
        "cgroup-oom-kills": run["cgroup-oom-kills"],
        "reversals": reversals(os.path.join(d, "agent.log")),
        "working-set-changes": len(schedule) - len(guests),
        "to-memory": to_memory,
        "series": {"given-back": given_back, "cgroup": cgroup, "balloons": balloons,
                   "working-set": working_set, "throughput": throughput},
        "budget-mib": run["budget-kib"] / 1024,
        "filled-mib": run["filled-kib"] / 1024,
        "seconds": run["seconds"],
    }


def r(x, digits=1):
    return None if x is None else round(x, digits)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: policies.py WORK POLICY...")
    work, policies = sys.argv[1], sys.argv[2:]
    runs = [policy_run(work, p) for p in policies]
    by_name = {run["policy"]: run for run in runs}
    static_ops = by_name.get("static", {}).get("ops-per-second")
    rows = []
    for run in runs:
        rel = (100 * run["ops-per-second"] / static_ops
               if run["ops-per-second"] and static_ops else None)
        worst = ("never" if None in run["to-memory"]
                 else max(run["to-memory"], default=0))
        rows.append([run["policy"], r(run["given-back-avg-mib"]), r(run["given-back-end-mib"]),
                     r(run["cgroup-avg-mib"]), r(run["cgroup-end-mib"]), r(rel),
                     run["swap-ins"], run["refaults"], run["oom-kills"], run["guests-lost"],
                     run["host-swap-out-pages"], run["host-thp-faults"], run["cgroup-failcnt"],
                     run["reversals"], worst])

    notes = [
        f"3 Debian guests of 1024 MiB, their QEMUs in one memory cgroup limited to "
        f"{runs[0]['budget-mib']:.0f} MiB; redis with 256 MiB of values in each, "
        "GETs over a hot set that jumps (a: 26 -> 154 MiB at 150 s and back at 270 s; "
        "b: 26 -> 154 MiB at 210 s; c: 77 MiB throughout); "
        f"{runs[0]['seconds']} s per policy, each from guests booted afresh and filled, "
        "the cgroup holding "
        + " / ".join(f"{run['filled-mib']:.0f}" for run in runs)
        + " MiB when the budget was set",
        "given back: the guests' maxima less their balloons, what the guests gave up; "
        "cgroup: the VMs' memory cgroup usage, what the host holds for them; "
        "throughput: redis commands "
        "per guest-second relative to static; swap-ins, refaults (anon + file) and OOM "
        "kills: the guests' /proc/vmstat deltas; host swap-outs: the host's pswpout; "
        "host THP faults: 2 MiB pages the host faulted in for the VMs during the run; "
        "limit hits: the cgroup's failcnt",
        "host transparent huge pages: "
        + " / ".join(sorted({run["host-thp"] for run in runs}))
        + " (docs/balloon-policy.md: with THP on, the balloons give the host little)",
        "reversals: agent requests in the other direction than the domain's last; "
        "s to memory: worst time from a working-set jump until the guest's swap-ins stay "
        f"under {CALM_SWAP_IN_RATE}/s for 10 s (never: not within the run)",
    ]
    static = by_name.get("static")
    if static and static["cgroup-avg-mib"] is not None:
        notes.append("host view: against static, the VMs' cgroup held on average "
                     + ", ".join(f"{run['cgroup-avg-mib'] - static['cgroup-avg-mib']:+.0f} MiB "
                                 f"under {run['policy']}"
                                 for run in runs if run is not static))
    mom, kst = by_name.get("mom"), by_name.get("kstaled")
    if mom and kst and static_ops:
        freed = (kst["given-back-avg-mib"] or 0) / mom["given-back-avg-mib"] \
            if mom["given-back-avg-mib"] else None
        rel = 100 * (kst["ops-per-second"] or 0) / static_ops
        checks = [
            ("kstaled frees >= 1.5x what mom frees (time-averaged)",
             freed is not None and freed >= 1.5,
             "no memory freed by mom" if freed is None else f"{freed:.2f}x"),
            ("the host holds less for the VMs under kstaled than under static "
             "(cgroup, time-averaged)",
             kst["cgroup-avg-mib"] < static["cgroup-avg-mib"],
             f"{kst['cgroup-avg-mib']:.0f} against {static['cgroup-avg-mib']:.0f} MiB"),
            ("kstaled throughput within 5 % of static", rel >= 95, f"{rel:.1f} %"),
            ("no guest OOM kill under kstaled", kst["oom-kills"] == 0 and not kst["guests-lost"],
             f"{kst['oom-kills']} kills, {kst['guests-lost']} guests lost"),
            ("no host swap under kstaled", kst["host-swap-out-pages"] == 0,
             f"{kst['host-swap-out-pages']} pages"),
            ("at most one reversal per working-set change under kstaled",
             kst["reversals"] <= kst["working-set-changes"],
             f"{kst['reversals']} for {kst['working-set-changes']} changes"),
        ]
        notes += [f"target: {name}: {'met' if ok else 'NOT met'} ({figure})"
                  for name, ok, figure in checks]

    panels = []
    for run in runs:
        s = run["series"]
        lines = {"given back": s["given-back"], "VMs' cgroup": s["cgroup"]}
        styles = {"given back": {"color": "black", "linewidth": 2},
                  "VMs' cgroup": {"color": "grey", "linewidth": 2}}
        # A guest's balloon and its hot set in one colour.
        for i, g in enumerate(s["balloons"]):
            lines[f"{g[-1]} balloon"] = s["balloons"][g]
            lines[f"{g[-1]} hot set"] = s["working-set"][g]
            styles[f"{g[-1]} balloon"] = {"color": f"C{i}"}
            styles[f"{g[-1]} hot set"] = {"color": f"C{i}", "linestyle": "--"}
        # The guests' samples are not aligned: their sum per 10 s is the
        # mean rate of the bin times the number of guests.
        per_t = {}
        for t, rate, _ in s["throughput"]:
            per_t.setdefault(t // 10 * 10, []).append(rate)
        guests = len(s["balloons"])
        panels.append({
            "title": f"6. {run['policy']}", "ylabel": "MiB", "lines": lines,
            "styles": styles,
            "y2label": "redis commands/s, all guests",
            "lines2": {"throughput": sorted([t, sum(v) / len(v) * guests]
                                            for t, v in per_t.items())},
        })

    json.dump({
        "section": 6, "name": "policies",
        "title": "Balloon policies side by side (3 guests, overcommitted cgroup)",
        "columns": ["policy", "given back avg MiB", "given back end MiB",
                    "cgroup avg MiB", "cgroup end MiB",
                    "throughput % of static", "swap-ins", "refaults", "OOM kills",
                    "guests lost", "host swap-outs", "host THP faults", "limit hits",
                    "reversals",
                    "worst s to memory"],
        "rows": rows, "notes": notes, "timeseries": panels,
        "raw": {run["policy"]: {k: v for k, v in run.items() if k != "series"} for run in runs},
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
