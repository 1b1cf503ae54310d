#!/usr/bin/env bash
# The benchmark suite (docs/benchmarks.md): builds in release mode (scratch path .build-bench,
# apart from the test builds), runs every figure in one run, and writes
#   Benchmarks/results/table.md      the table (also printed)
#   Benchmarks/results/latency.csv   every latency sample (scenario, receiver, ns)
#   Benchmarks/results/machine.txt   the machine and its load during the run
#   docs/benchmarks-latency.png      the latency plot
#
#   scripts/bench.sh            the whole suite: about 1 minute on 2 cores, after the first
#                               release build (a few minutes)
#   scripts/bench.sh --quick    fewer samples, about 20 s, into Benchmarks/results/quick:
#                               a smoke run, figures indicative only
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

# A --quick run writes apart (Benchmarks/results/quick, not committed), so the committed
# results stay those of the last full run.
quick=false
case " $* " in *" --quick "*) quick=true ;; esac
if $quick; then default_out=Benchmarks/results/quick; else default_out=Benchmarks/results; fi
out=${HEARTH_BENCH_OUT:-$default_out}
mkdir -p "$out"
swift build -c release --scratch-path .build-bench --product hearth-benchmarks
# The daemon section runs the real `hearth daemon`, found next to the benchmark binary.
swift build -c release --scratch-path .build-bench --product hearth

# Asked before machine.txt is rewritten, and not counting this command's own outputs.
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD -- . ':!Benchmarks/results' ':!docs/benchmarks-latency.png' 2>/dev/null || commit="$commit (with uncommitted changes)"
{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit:  $commit"
  echo "cpus:    $(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "kernel:  $(uname -sr)"
  echo "swift:   $(swift --version 2>/dev/null | head -1)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"

.build-bench/release/hearth-benchmarks "$@" --out "$out"

# The same run's busy device (issue 13, point 8): 9 devices running hearth daemon with 20
# stores each; its connections, listeners, mDNS services, idle CPU, wake-ups and RSS.
case " $* " in
  *" --quick "*|*" --only "*) ;;
  *) { echo
       echo "### 8b. A device running hearth daemon with 20 stores and 8 peer devices (scripts/bench-daemon.sh)"
       echo
       scripts/bench-daemon.sh | grep '^|'
     } | tee -a "$out/table.md" ;;
esac

echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
cat "$out/machine.txt"

plot=docs/benchmarks-latency.png
if $quick; then plot="$out/benchmarks-latency.png"; fi
python3 scripts/plot-latency.py "$out/latency.csv" "$plot"
