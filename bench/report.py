#!/usr/bin/env python3
"""Summarises bench.sh's raw CSV: the median per workload and target, side by side.

Usage: report.py RUNS.csv LATEST.md [header line ...]

The CSV has the columns workload,unit,better,target,run,value where `better` is
"higher" (rates) or "lower" (times). The speed ratios are oriented so that a ratio
above 1 always means AppBox is faster: rate(AppBox) / rate(other) for rates,
time(other) / time(AppBox) for times. Runs are also paired by their number: the ratio
to bindfs within each run (the targets of one run are measured minutes apart, in
rotating order) gives the spread and how many runs AppBox was ahead in.

Targets: native, bindfs and appbox always; appbox-uring (AppBox over FUSE over io_uring),
appbox-wc (AppBox with --write-cache) and passthrough_hp (libfuse's example over io_uring)
when the run had them. Each AppBox target gets a ratio column against each of its peers
in the run (PAIRS).
"""

import csv
import statistics
import sys

ORDER = [
    "seqwrite", "seqread", "randread", "randwrite", "appends",
    "create", "stat", "unlink", "untar", "gitstatus", "rm",
    "req-create", "req-untar", "req-rm",
]
TITLES = {
    "seqwrite": "sequential write (fsync)",
    "seqread": "sequential read, cold cache",
    "randread": "4 KiB random read",
    "randwrite": "4 KiB random write (end fsync)",
    "appends": "small appends (4 B, O_APPEND)",
    "create": "create empty files",
    "stat": "stat files",
    "unlink": "unlink files",
    "untar": "untar + sync",
    "gitstatus": "git status (warm)",
    "rm": "rm -rf tree",
    "req-create": "requests per created file",
    "req-untar": "requests per untarred file",
    "req-rm": "requests per file of rm -rf",
}
TARGETS = ["native", "bindfs", "passthrough_hp", "appbox", "appbox-uring", "appbox-wc"]
# Each AppBox target against: the other transport or mode, passthrough_hp, bindfs, native.
PAIRS = [
    ("appbox", "passthrough_hp"), ("appbox", "bindfs"), ("appbox", "native"),
    ("appbox-uring", "appbox"), ("appbox-uring", "passthrough_hp"), ("appbox-uring", "bindfs"),
    ("appbox-uring", "native"),
    ("appbox-wc", "appbox-uring"), ("appbox-wc", "passthrough_hp"), ("appbox-wc", "bindfs"), ("appbox-wc", "native"),
]


def fmt(value):
    if value is None:
        return "–"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def speed(appbox, other, better):
    if appbox is None or other is None or appbox == 0 or other == 0:
        return None
    return appbox / other if better == "higher" else other / appbox


def main() -> int:
    runs_path, md_path, header = sys.argv[1], sys.argv[2], sys.argv[3:]
    values, by_run, units, better, counts = {}, {}, {}, {}, {}
    with open(runs_path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["workload"], row["target"])
            values.setdefault(key, []).append(float(row["value"]))
            by_run.setdefault(key, {})[row["run"]] = float(row["value"])
            units[row["workload"]] = row["unit"]
            better[row["workload"]] = row["better"]
    workloads = [w for w in ORDER if w in units] + sorted(w for w in units if w not in ORDER)

    present = {t for (_, t) in values}
    targets = [t for t in TARGETS if t in present]
    pairs = [(a, p) for a, p in PAIRS if a in present and p in present]
    columns = ["workload", "unit"] + targets + [f"{a} vs {p} (×)" for a, p in pairs] + [
        "per run vs bindfs (×)", "ahead of bindfs",
    ]
    rows = []
    for w in workloads:
        med = {}
        for t in targets:
            vs = values.get((w, t))
            med[t] = statistics.median(vs) if vs else None
            counts[t] = max(counts.get(t, 0), len(vs or []))
        unit = units[w] + (" ↑" if better[w] == "higher" else " ↓")
        ratios = [speed(med[a], med[p], better[w]) for a, p in pairs]
        vb = speed(med.get("appbox"), med.get("bindfs"), better[w])
        paired = by_run.get((w, "appbox"), {}), by_run.get((w, "bindfs"), {})
        per_run = [r for r in (speed(paired[0][n], paired[1][n], better[w]) for n in paired[0] if n in paired[1]) if r]
        spread = f"{min(per_run):.2f}–{max(per_run):.2f}" if len(per_run) > 1 else "–"
        ahead = "–" if vb is None else ("yes" if vb > 1 else "**NO**")
        if per_run:
            ahead += f" ({sum(r > 1 for r in per_run)}/{len(per_run)} runs)"
        rows.append(
            [TITLES.get(w, w), unit] + [fmt(med[t]) for t in targets]
            + ["–" if r is None else f"{r:.2f}" for r in ratios] + [spread, ahead]
        )

    legend = (
        "Medians over the runs. Unit ↑ = higher is better (rates), ↓ = lower is better (seconds). "
        "Ratio columns are speed ratios: above 1 means AppBox is faster "
        "(rate(AppBox)/rate(other), or time(other)/time(AppBox)). "
        "Per run: the lowest and highest ratio to bindfs within one run; "
        "(k/n runs): in how many runs AppBox was ahead of bindfs."
    )
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    line = lambda cells: "  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(cells))
    print(line(columns))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    print(legend)

    with open(md_path, "w") as f:
        f.write("# AppBox benchmark\n\n")
        for h in header:
            f.write(f"- {h}\n")
        f.write("\n| " + " | ".join(columns) + " |\n")
        f.write("|" + "|".join(["---", "---"] + ["---:"] * (len(columns) - 2)) + "|\n")
        for r in rows:
            f.write("| " + " | ".join(r) + " |\n")
        f.write(f"\n{legend}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
