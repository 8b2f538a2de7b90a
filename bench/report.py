#!/usr/bin/python3
"""report.py DIR: merge the section fragments DIR/section-*.json into
DIR/bench.json, print one table per section and plot DIR/bench.png.

A fragment is {"section": N, "name", "title", "columns", "rows",
"notes"?, "plot"?: {"x", "series", "y", "ylabel"} or {"x", "y": [columns],
"ylabel"}, "timeseries"?: [{"title", "ylabel", "lines": {label: [[t, v]...]},
"styles"?: {label: matplotlib line keywords}, "y2label"?, "lines2"?: {...}}], ...raw figures}.  A section's timeseries
panels are drawn one above the other on a shared time axis.
Sections without a fragment keep their slot, marked "not measured".
"""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Every section the benchmark is to have; each is measured by
# bench/section-N-NAME.sh.
SLOTS = {
    1: ("scan-cost", "Scan cost"),
    2: ("accuracy", "Idle memory estimate vs truth"),
    3: ("reaction-time", "Reaction time"),
    4: ("agent-savings", "Agent memory savings"),
    5: ("agent-cost", "Agent cost"),
    6: ("policies", "Balloon policies side by side"),
    7: ("hooks-off", "Cost of the hooks when kstaled is off"),
}


def load_sections(out_dir):
    sections = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "section-*.json"))):
        with open(path) as f:
            fragment = json.load(f)
        sections[fragment["section"]] = fragment
    for number, (name, title) in SLOTS.items():
        sections.setdefault(number, {
            "section": number, "name": name, "title": title, "status": "not measured",
            "why": f"no result from bench/section-{number}-{name}.sh",
        })
    return [sections[n] for n in sorted(sections)]


def cell(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def print_table(section):
    title = section.get("title", section["name"])
    print(f"\n== {section['section']}. {title}")
    if "rows" not in section:
        print(f"   {section['status']}: {section['why']}")
        return
    table = [section["columns"]] + [[cell(v) for v in row] for row in section["rows"]]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for i, row in enumerate(table):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for note in section.get("notes", []):
        print(f"   note: {note}")


def plot_timeseries(ax, panel, share):
    styles = panel.get("styles", {})
    for label, points in panel["lines"].items():
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], label=label,
                    **styles.get(label, {}))
    ax.set_ylabel(panel["ylabel"])
    ax.set_title(panel["title"])
    handles, labels = ax.get_legend_handles_labels()
    if panel.get("lines2"):
        ax2 = ax.twinx()
        for label, points in panel["lines2"].items():
            ax2.plot([p[0] for p in points], [p[1] for p in points], label=label,
                     color="grey", linestyle=":")
        ax2.set_ylabel(panel["y2label"])
        ax2.set_ylim(bottom=0)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, fontsize="x-small", ncol=4, loc="upper right")
    if share is not None:
        ax.sharex(share)
    ax.set_xlabel("s")


def plot(sections, path):
    plotted = [s for s in sections if "plot" in s and s.get("rows")]
    panels = [p for s in sections if s.get("rows") for p in s.get("timeseries", [])]
    if not plotted and not panels:
        return False
    fig, axes = plt.subplots(len(plotted) + len(panels), 1,
                             figsize=(8, 4 * len(plotted) + 3 * len(panels)), squeeze=False)
    for i, panel in enumerate(panels):
        plot_timeseries(axes[len(plotted) + i, 0], panel,
                        axes[len(plotted), 0] if i else None)
    for ax, section in zip(axes[:, 0], plotted):
        spec, columns = section["plot"], section["columns"]
        xi = columns.index(spec["x"])
        xs = []
        for row in section["rows"]:
            if row[xi] not in xs:
                xs.append(row[xi])
        # Series are either the values of one column ("series", with one
        # "y" column) or several "y" columns.
        series = {}
        if "series" in spec:
            si, yi = columns.index(spec["series"]), columns.index(spec["y"])
            for row in section["rows"]:
                if row[yi] is not None:
                    series.setdefault(str(row[si]), {})[row[xi]] = row[yi]
        else:
            for name in spec["y"]:
                yi = columns.index(name)
                series[name] = {row[xi]: row[yi] for row in section["rows"]
                                if row[yi] is not None}
        width = 0.8 / max(len(series), 1)
        for n, (name, values) in enumerate(series.items()):
            positions = [i + n * width for i, x in enumerate(xs) if x in values]
            ax.bar(positions, [values[x] for x in xs if x in values], width, label=name)
        ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(xs))])
        # Slanted when many, or long, labels would overlap.
        labels = [str(x) for x in xs]
        crowded = len(xs) > 6 or sum(len(x) for x in labels) > 60
        ax.set_xticklabels(labels, rotation=30 if crowded else 0,
                           ha='right' if crowded else 'center')
        ax.set_xlabel(spec["x"])
        ax.set_ylabel(spec["ylabel"])
        ax.set_title(f"{section['section']}. {section.get('title', section['name'])}")
        ax.axhline(0, color="black", linewidth=0.5)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return True


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report.py DIR")
    out_dir = sys.argv[1]
    sections = load_sections(out_dir)
    with open(os.path.join(out_dir, "bench.json"), "w") as f:
        json.dump({"sections": sections}, f, indent=1)
        f.write("\n")
    for section in sections:
        print_table(section)
    png = os.path.join(out_dir, "bench.png")
    print(f"\nJSON: {os.path.join(out_dir, 'bench.json')}")
    if plot(sections, png):
        print(f"plot: {png}")


if __name__ == "__main__":
    main()
