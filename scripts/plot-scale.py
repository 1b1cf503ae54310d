#!/usr/bin/env python3
"""Plots the scale curve of a benchmark run (scripts/bench.sh, docs/benchmarks.md, section 9).

    scripts/plot-scale.py Benchmarks/results/scale.csv docs/benchmarks-scale.png

Top row: a full mesh of 2, 4, 8 and 16 devices (one store each). Bottom row: 4 devices with
1, 10 and 20 stores each. Left: the last receiver's latency (p50, p99). Middle: entries carried
per change, against N - 1 (each change crossing each of its writer's links once) and N(N - 1)
(every link). Right: CPU per change, all processes together, against a line through the first
point growing as N - 1 (linear in the household). matplotlib is installed from PyPI (pip
--user) if it is missing.
"""
import csv
import subprocess
import sys

try:
    import matplotlib
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--user", "matplotlib"])
    import site, importlib
    importlib.reload(site)
    import matplotlib
matplotlib.use("Agg")  # no display: write the file only
import matplotlib.pyplot as plt


def main(source, target):
    rows = list(csv.DictReader(open(source)))
    curves = {name: sorted((r for r in rows if r["curve"] == name), key=lambda r: (int(r["devices"]), int(r["stores"])))
              for name in ("devices", "stores")}
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for row_index, (name, xkey, xlabel) in enumerate([("devices", "devices", "devices in the mesh (1 store each)"),
                                                      ("stores", "stores", "stores per device (4 devices)")]):
        points = curves[name]
        if not points:
            continue
        x = [int(p[xkey]) for p in points]
        n = [int(p["devices"]) for p in points]
        latency, entries, cpu = axes[row_index]
        latency.plot(x, [int(p["p50_ns"]) / 1e6 for p in points], "o-", label="p50")
        latency.plot(x, [int(p["p99_ns"]) / 1e6 for p in points], "s--", label="p99")
        latency.set_ylabel("last receiver, ms")
        latency.set_title("propagation to the last receiver")
        entries.plot(x, [float(p["entries_per_change"]) for p in points], "o-", label="measured")
        entries.plot(x, [k - 1 for k in n], ":", label="N − 1 (writer's links)")
        if name == "devices":
            entries.plot(x, [k * (k - 1) for k in n], ":", label="N(N − 1) (every link)")
            entries.set_yscale("log")
        entries.set_ylabel("entries carried per change")
        entries.set_title("entries per change")
        measured = [float(p["cpu_us_per_change"]) for p in points]
        cpu.plot(x, measured, "o-", label="measured, all processes")
        if name == "devices":
            cpu.plot(x, [measured[0] * (k - 1) / (n[0] - 1) for k in n], ":", label="linear in N − 1 from the first point")
        cpu.set_ylabel("CPU µs per change")
        cpu.set_title("CPU per change")
        for axis in (latency, entries, cpu):
            axis.set_xlabel(xlabel)
            axis.set_xticks(x)
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize=8)
            axis.set_ylim(bottom=0 if axis.get_yscale() == "linear" else None)
    fig.suptitle("Hearth scale curve (scripts/bench.sh --only scale; scale.csv)")
    fig.tight_layout()
    fig.savefig(target, dpi=90)
    print(f"wrote {target}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
