#!/usr/bin/python3
"""demo-plot.py CSV PNG KEYS HOT_KEYS: the picture of one scripts/demo.sh
run over time: the guest's used memory, redis' memory by idle age as
kstaled reports it, the agent's target, the balloon and what the host
holds of the guest's RAM, with redis' latency below and the workload's
phases shaded."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1 << 20


def main(csv_path, png_path, keys, hot_keys):
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{csv_path}: no samples")
    t = [int(r["seconds"]) for r in rows]

    def series(name):
        return [int(r[name]) / MIB for r in rows]

    fig, (mem, lat) = plt.subplots(2, 1, sharex=True, figsize=(11, 7),
                                   gridspec_kw={"height_ratios": [3, 1]})
    mem.plot(t, series("balloon"), label="balloon (guest memory)", color="black", linewidth=2)
    mem.plot(t, series("agent_target"), label="agent target", color="tab:red", linestyle="--")
    mem.plot(t, series("host_guest_ram"), label="host: resident guest RAM (QEMU's mapping)",
             color="tab:purple", linewidth=2)
    mem.plot(t, series("guest_used"), label="guest used (MemTotal - MemAvailable)", color="tab:blue")
    for name, label, shade in (("idle_1", ">= 1 scan", "0.85"), ("idle_15", ">= 15 scans", "0.65"),
                               ("idle_60", ">= 60 scans", "0.45")):
        mem.fill_between(t, series(name), color=shade, alpha=0.6,
                         label=f"redis memory idle {label} (kstaled)")
    mem.set_ylabel("MiB")
    mem.set_ylim(bottom=0)
    mem.set_title(f"kstaled-vm demo: Debian 12 guest, redis with {keys} keys, "
                  f"{hot_keys} read every second")
    lat.plot(t, [int(r["redis_ms"]) for r in rows], color="tab:green")
    lat.set_ylabel("redis read of\nhot keys, ms")
    lat.set_xlabel("seconds since the agent started")
    lat.set_ylim(bottom=0)

    # Shade the samples taken while every key was being read.
    sweep = [x for x, r in zip(t, rows) if r["phase"] == "sweep"]
    if sweep:
        for ax in (mem, lat):
            ax.axvspan(sweep[0], sweep[-1], color="tab:orange", alpha=0.15)
        mem.text(sweep[0], mem.get_ylim()[1] * 0.97, " every key read", va="top",
                 color="tab:orange")
    mem.legend(loc="lower left", fontsize="small")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: demo-plot.py CSV PNG KEYS HOT_KEYS")
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
