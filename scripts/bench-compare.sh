#!/usr/bin/env bash
# Compares the latency figures of two commits in one run (docs/benchmarks.md, "Before and
# after"): builds the benchmark of REV (a git worktree under /tmp, its own .build-bench) and of
# the work tree, then runs their latency sections alternately, ROUNDS times each, so both meet
# the same machine and the same load. Prints each round's rows and the median of each figure.
#
#   scripts/bench-compare.sh REV [ROUNDS]      e.g. scripts/bench-compare.sh 6b5659c 3
#   scripts/bench-compare.sh DIR [ROUNDS]      DIR: a checkout of the other commit
#
# Both run as the user who runs the script: a commit that cannot sync as that user (6b5659c
# as anyone but root: SO_DEBUG) prints no latency rows.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
rev=${1:?usage: $0 REV [ROUNDS]}
rounds=${2:-3}

# REV may also be a folder that already holds a checkout of it (its build is reused).
if [ -d "$rev" ]; then before=$rev; else
  before=/tmp/hearth-bench-$(git rev-parse --short "$rev")
  [ -d "$before" ] || git worktree add -q --detach "$before" "$rev"
fi
( cd "$before" && swift build -c release --scratch-path .build-bench --product hearth-benchmarks >/dev/null )
swift build -c release --scratch-path .build-bench --product hearth-benchmarks >/dev/null

rows='^\| (floor: |2 peers |line A–B–C, at C|8 peers full mesh, (each|last) of 7 receivers \|)'
out=$(mktemp -d /tmp/hearth-bench-compare.XXXXXX)
for round in $(seq "$rounds"); do
  for side in before after; do
    if [ "$side" = before ]; then binary="$before/.build-bench/release/hearth-benchmarks"; else binary=.build-bench/release/hearth-benchmarks; fi
    "$binary" --only latency --out "$out/$side-$round" 2>&1 | grep -E "$rows" | sed "s/^/$side $round /" | tee -a "$out/rows.txt"
  done
done

# Median of p50 and p99 (columns 4 and 5 of the table) per side and scenario.
echo
echo "| scenario | side | rounds | p50 (median of rounds) | p99 (median of rounds) |"
echo "| --- | --- | --- | --- | --- |"
python3 - "$out/rows.txt" "$rev" <<'PY'
import sys, statistics, collections
figures = collections.OrderedDict()
for line in open(sys.argv[1], encoding="utf-8"):
    side, _, rest = line.split(" ", 2)
    cells = [c.strip() for c in rest.strip().strip("|").split("|")]
    def ms(cell):
        return float(cell.split()[0]) if cell.endswith("ms") else None
    p50, p99 = ms(cells[2]), ms(cells[3])
    if p50 is None:
        continue
    figures.setdefault(cells[0], {}).setdefault(side, []).append((p50, p99))
for scenario, sides in figures.items():
    for side in ("before", "after"):
        values = sides.get(side, [])
        label = f"{side} ({sys.argv[2]})" if side == "before" else "after (work tree)"
        if not values:
            print(f"| {scenario} | {label} | 0 | no figures | |")
            continue
        p99s = [v[1] for v in values if v[1] is not None]
        p99 = f"{statistics.median(p99s):.3f} ms" if p99s else ""
        print(f"| {scenario} | {label} | {len(values)} | {statistics.median(v[0] for v in values):.3f} ms | {p99} |")
PY
echo "rows: $out/rows.txt"
