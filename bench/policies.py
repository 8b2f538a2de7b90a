#!/usr/bin/python3
"""policies.py WORK: the section fragment of bench/section-6-policies.sh
(see bench/report.py) from its runs' raw data, printed on stdout.

WORK/CONFIG/REP/ holds run.json, policy-start and jump (seconds since the
run's start), and per arm ARM/: host.tsv (the host's samples every 2 s),
touched-kib (the most the guest-RAM mapping held while the guest touched
its memory), budget-bytes, ops ("epoch ops latency-ms" lines: a redis batch
of 2000 GETs with its p99, or one 4 MiB read with its time), vmstat
("epoch counter=value..." lines), oom and agent.log.

Per arm, over its repetitions (mean and min-max):
  host freed      the guest-RAM mapping's mean resident set over the
                  guest's own pre-policy window less its mean over the
                  policy window (and over its last 30 s): what the host
                  got back, by the policy and free page reporting;
  given back      the guest's maximum less its mean balloon size;
  efficiency      host freed / given back (balloon arms only);
  throughput      the guest's ops/s in the policy window / in its own
                  pre-policy window; p99 the same for the latency figure
                  (the mean of redis batches' p99; the 99th percentile of
                  reads);
  swap-ins        pswpin over the policy window;
  reversals       agent requests in the other direction than the last;
  s to memory     from the working-set jump until swap-ins and file
                  refaults stay under CALM_RATE pages/s for 10 s;
  limit hits      host samples with the arm's cgroup over its budget.
The noise floor of a configuration is the spread (max - min) of
static-fpr's host freed; a difference under twice it counts as none.
"""
import json
import os
import re
import statistics
import sys

ARMS = ["static-fpr", "mom", "proxmox", "kstaled-fpr"]
CALM_RATE = 64
ACTION = re.compile(r"action=(inflate|deflate) ")
MIB = 1024.0


def read_tsv(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [dict(zip(header, map(int, line.split("\t"))))
                for line in f if line.strip()]
    return rows


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def window(rows, lo, hi, key):
    return mean([r[key] for r in rows if lo <= r["t"] < hi])


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(int(q * len(values)), len(values) - 1)]


def ops_window(ops, start, lo, hi, redis):
    """(ops per second, latency figure) of the ops lines in [lo, hi)."""
    inside = [(int(t) - start, float(n), float(ms)) for t, n, ms in
              (line[:3] for line in ops if len(line) >= 3)
              if lo <= int(t) - start < hi]
    if not inside:
        return None, None
    rate = sum(n for _, n, _ in inside) / (hi - lo)
    latency = (mean([ms for _, _, ms in inside]) if redis
               else percentile([ms for _, _, ms in inside], 0.99))
    return rate, latency


def vmstat(lines, start):
    samples = []
    for fields in lines:
        if not fields[0].isdigit():
            continue
        values = dict(kv.split("=", 1) for kv in fields[1:] if "=" in kv)
        if all(v.isdigit() for v in values.values()):
            samples.append((int(fields[0]) - start, {k: int(v) for k, v in values.items()}))
    return samples


def growth(samples, key, lo, hi):
    inside = [v.get(key, 0) for t, v in samples if lo <= t < hi]
    return inside[-1] - inside[0] if len(inside) >= 2 else None


def seconds_to_memory(samples, jump_at):
    after = [(t, v.get("pswpin", 0) + v.get("workingset_refault_file", 0))
             for t, v in samples if t >= jump_at - 2]
    calm_since = None
    for (t0, v0), (t1, v1) in zip(after, after[1:]):
        if (v1 - v0) / max(t1 - t0, 1) < CALM_RATE:
            if calm_since is None:
                calm_since = t0
            elif t1 - calm_since >= 10:
                return max(calm_since - jump_at, 0)
        else:
            calm_since = None
    return None


def reversals(path):
    last, count = None, 0
    for fields in read_lines(path):
        m = ACTION.search(" ".join(fields))
        if m:
            if last not in (None, m.group(1)):
                count += 1
            last = m.group(1)
    return count


def arm_rep(rep_dir, arm, run):
    d = os.path.join(rep_dir, arm)
    start = run["start"]
    with open(os.path.join(rep_dir, "policy-start")) as f:
        policy_at = int(f.read())
    with open(os.path.join(rep_dir, "jump")) as f:
        jump_at = int(f.read())
    end = run["pre-seconds"] + run["policy-seconds"]
    host = read_tsv(os.path.join(d, "host.tsv"))
    with open(os.path.join(d, "touched-kib")) as f:
        touched = int(f.read())
    with open(os.path.join(d, "budget-bytes")) as f:
        budget_kib = int(f.read()) / 1024
    mem = run["mem-kib"]
    reference = window(host, 0, policy_at, "guest-ram-kib")
    ram = window(host, policy_at, end, "guest-ram-kib")
    ram_last = window(host, end - 30, end, "guest-ram-kib")
    balloon = window(host, policy_at, end, "balloon-kib")
    redis = run["config"] == "disk-swap"
    ops = read_lines(os.path.join(d, "ops"))
    pre_rate, pre_lat = ops_window(ops, start, 10, policy_at, redis)
    rate, lat = ops_window(ops, start, policy_at, end, redis)
    samples = vmstat(read_lines(os.path.join(d, "vmstat")), start)
    freed = (reference - ram) / MIB if ram is not None else None
    given = (mem - balloon) / MIB if balloon is not None else None
    return {
        "host-freed-mib": freed,
        "host-freed-last-mib": (reference - ram_last) / MIB if ram_last is not None else None,
        "pre-policy-mib": reference / MIB,
        "touched-mib": touched / MIB,
        "freed-percent": 100 * freed * MIB / mem if freed is not None else None,
        "given-back-mib": given,
        "efficiency": freed / given if freed is not None and given and given > 16 else None,
        "throughput-percent": 100 * rate / pre_rate if rate and pre_rate else None,
        "p99-ratio": lat / pre_lat if lat and pre_lat else None,
        "swap-ins": growth(samples, "pswpin", policy_at, end + 5),
        "reversals": reversals(os.path.join(d, "agent.log")),
        "to-memory-s": seconds_to_memory(samples, jump_at),
        "oom-kills": sum(1 for line in read_lines(os.path.join(d, "oom"))
                         if "Killed" in line),
        "limit-hits": sum(1 for r in host if r["t"] >= policy_at and r["cgroup-kib"] > budget_kib),
        "qemu-own-mib": window(host, policy_at, end, "qemu-own-kib") / MIB,
        "series": {
            "guest RAM": [[r["t"], r["guest-ram-kib"] / MIB] for r in host],
            "balloon": [[r["t"], r["balloon-kib"] / MIB] for r in host],
        },
    }


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values),
            "n": len(values)}


def fmt(s, digits=0):
    if s is None:
        return None
    if s["n"] == 1 or s["min"] == s["max"]:
        return f"{s['mean']:.{digits}f}"
    return f"{s['mean']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


COLUMNS = [("host-freed-mib", "host freed MiB", 0),
           ("freed-percent", "% of guest", 0),
           ("host-freed-last-mib", "freed last 30 s", 0),
           ("given-back-mib", "given back MiB", 0),
           ("efficiency", "efficiency", 2),
           ("throughput-percent", "throughput %", 0),
           ("p99-ratio", "p99 ratio", 2),
           ("swap-ins", "swap-ins", 0),
           ("reversals", "reversals", 1),
           ("to-memory-s", "s to memory", 0),
           ("oom-kills", "OOM kills", 0),
           ("limit-hits", "limit hits", 0)]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: policies.py WORK")
    work = sys.argv[1]
    rows, notes, panels, raw = [], [], [], {}
    configs = sorted(os.listdir(work))
    for config in configs:
        reps = sorted(os.listdir(os.path.join(work, config)), key=int)
        per_arm = {arm: [] for arm in ARMS}
        host_swap = 0
        for rep in reps:
            rep_dir = os.path.join(work, config, rep)
            with open(os.path.join(rep_dir, "run.json")) as f:
                run = json.load(f)
            host_swap += run["host-swap-out-pages"]
            for arm in ARMS:
                per_arm[arm].append(arm_rep(rep_dir, arm, run))
        stats = {arm: {key: spread([r[key] for r in per_arm[arm]]) for key, _, _ in COLUMNS}
                 for arm in ARMS}
        for arm in ARMS:
            rows.append([config, arm] + [fmt(stats[arm][key], digits) for key, _, digits in COLUMNS])
        raw[config] = {arm: [{k: v for k, v in r.items() if k != "series"} for r in per_arm[arm]]
                       for arm in ARMS}
        noise = stats["static-fpr"]["host-freed-mib"]
        floor = 2 * (noise["max"] - noise["min"]) if noise else None
        notes.append(f"{config}: {len(reps)} repetitions; noise floor (twice the spread of "
                     f"static-fpr's host freed): {floor:.0f} MiB; host swap-outs "
                     f"{host_swap} pages" if floor is not None else f"{config}: no static-fpr figures")
        notes += checks(config, per_arm, floor)
        for arm in ARMS:
            if per_arm[arm]:
                first = per_arm[arm][0]["series"]
                panels.append({"title": f"6. {config}: {arm} (repetition 1)", "ylabel": "MiB",
                               "lines": first,
                               "styles": {"guest RAM": {"color": "tab:purple", "linewidth": 2},
                                          "balloon": {"color": "black"}}})
    notes.append("host freed: the guest-RAM mapping's resident set (smaps of QEMU, as the host "
                 "sees it) averaged over the guest's own pre-policy window, less its mean "
                 "under the arm; values are mean [min-max] over the repetitions")
    json.dump({
        "section": 6, "name": "policies",
        "title": "Balloon policies side by side, host memory measured at the host",
        "columns": ["config", "arm"] + [name for _, name, _ in COLUMNS],
        "rows": rows, "notes": notes, "timeseries": panels, "raw": raw,
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


def checks(config, per_arm, floor):
    """The issue's targets, checked per repetition."""
    kst = per_arm["kstaled-fpr"]
    n = len(kst)
    if not n:
        return []
    best = [max((per_arm[a][i]["host-freed-mib"] or 0) for a in ARMS if a != "kstaled-fpr")
            for i in range(n)]
    freed = [r["host-freed-mib"] or 0 for r in kst]

    def count(ok):
        return f"{sum(ok)} of {n}"

    if config == "disk-swap":
        items = [
            ("kstaled frees >= 1.5x the best baseline",
             [f >= 1.5 * b for f, b in zip(freed, best)],
             ", ".join(f"{f:.0f}/{b:.0f}" for f, b in zip(freed, best))),
            (">= 30 % of the guest freed", [(r["freed-percent"] or 0) >= 30 for r in kst],
             ", ".join(f"{r['freed-percent'] or 0:.0f} %" for r in kst)),
            ("throughput >= 95 %", [(r["throughput-percent"] or 0) >= 95 for r in kst],
             ", ".join(f"{r['throughput-percent'] or 0:.0f} %" for r in kst)),
            ("p99 <= 1.2x", [r["p99-ratio"] is not None and r["p99-ratio"] <= 1.2 for r in kst],
             ", ".join(f"{r['p99-ratio'] or 0:.2f}" for r in kst)),
            ("efficiency >= 0.8", [r["efficiency"] is not None and r["efficiency"] >= 0.8 for r in kst],
             ", ".join("-" if r["efficiency"] is None else f"{r['efficiency']:.2f}" for r in kst)),
            ("<= 1 reversal per working-set change", [r["reversals"] <= 1 for r in kst],
             ", ".join(str(r["reversals"]) for r in kst)),
            ("no guest OOM kill", [r["oom-kills"] == 0 for r in kst],
             ", ".join(str(r["oom-kills"]) for r in kst)),
        ]
    else:
        items = [
            ("kstaled frees more than every baseline, beyond the noise floor",
             [f - b > (floor or 0) for f, b in zip(freed, best)],
             ", ".join(f"{f:.0f}/{b:.0f}" for f, b in zip(freed, best))),
            ("throughput >= 95 %", [(r["throughput-percent"] or 0) >= 95 for r in kst],
             ", ".join(f"{r['throughput-percent'] or 0:.0f} %" for r in kst)),
        ]
    return [f"{config} target: {name}: {'met' if all(ok) else 'NOT met'} "
            f"(met in {count(ok)} repetitions: {figs})"
            for name, ok, figs in items]


if __name__ == "__main__":
    main()
