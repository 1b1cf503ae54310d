#!/usr/bin/env python3
"""Plots the latency distribution of a benchmark run (scripts/bench.sh, docs/benchmarks.md).

    scripts/plot-latency.py Benchmarks/results/latency.csv docs/benchmarks-latency.png

Left: the distribution of each scenario (share of changes that arrived within a time), on a
log scale, with the TCP and TLS echo floors. Right: p50, p99 and max side by side.
matplotlib is installed from PyPI (pip --user) if it is missing.
"""
import csv
import subprocess
import sys
from collections import defaultdict

try:
    import matplotlib
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--user", "matplotlib"])
    import site, importlib
    importlib.reload(site)
    import matplotlib
matplotlib.use("Agg")  # no display: write the file only
import matplotlib.pyplot as plt

ORDER = ["floor-tcp", "floor-tls", "2 peers", "line of 3 at B", "line of 3 at C", "8 peers mesh", "8 peers mesh last of 7"]
LABELS = {
    "floor-tcp": "floor: TCP echo round trip",
    "floor-tls": "floor: TLS echo round trip",
    "2 peers": "2 peers",
    "line of 3 at B": "line A-B-C, at B",
    "line of 3 at C": "line A-B-C, at C (relayed)",
    "8 peers mesh": "8 peers mesh, each receiver",
    "8 peers mesh last of 7": "8 peers mesh, last of 7",
}


def percentile(sorted_values, q):
    """Nearest rank, as the benchmark's table computes it."""
    rank = max(1, -(-int(q * 1000) * len(sorted_values) // 1000))
    return sorted_values[min(len(sorted_values), rank) - 1]


def main():
    source, target = sys.argv[1], sys.argv[2]
    samples = defaultdict(list)
    with open(source) as f:
        for row in csv.DictReader(f):
            samples[row["scenario"]].append(int(row["nanoseconds"]) / 1e6)
    scenarios = [s for s in ORDER if s in samples] + sorted(set(samples) - set(ORDER))

    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(14, 6.5), gridspec_kw={"width_ratios": [3, 2]})
    for name in scenarios:
        values = sorted(samples[name])
        n = len(values)
        style = "--" if name.startswith("floor") else "-"
        cdf.plot(values, [(i + 1) / n for i in range(n)], style, label=f"{LABELS.get(name, name)} (n={n})")
    cdf.set_xscale("log")
    cdf.set_xlabel("milliseconds (log scale)")
    cdf.set_ylabel("share of changes arrived")
    cdf.set_title("set → didChangeExternallyNotification in another process, TLS on loopback")
    cdf.axvline(1, color="grey", lw=0.8, ls=":")
    cdf.axvline(5, color="grey", lw=0.8, ls=":")
    cdf.axvline(10, color="grey", lw=0.8, ls=":")
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)

    width = 0.27
    positions = range(len(scenarios))
    for k, (q, label) in enumerate([(0.50, "p50"), (0.99, "p99"), (1.0, "max")]):
        heights = [percentile(sorted(samples[s]), q) for s in scenarios]
        bars.bar([p + (k - 1) * width for p in positions], heights, width, label=label)
    bars.set_yscale("log")
    bars.set_xticks(list(positions))
    bars.set_xticklabels([LABELS.get(s, s) for s in scenarios], rotation=35, ha="right", fontsize=8)
    bars.set_ylabel("milliseconds (log scale)")
    bars.set_title("p50, p99, max")
    bars.grid(True, axis="y", which="both", alpha=0.3)
    bars.legend(fontsize=8)

    fig.tight_layout()
    fig.savefig(target, dpi=110)
    print(f"plot: {target}")


if __name__ == "__main__":
    main()
