#!/usr/bin/env bash
# The benchmark suite (docs/benchmarks.md): builds in release mode (scratch path .build-bench,
# apart from the test builds), runs every figure in one run, and writes
#   Benchmarks/results/table.md      the table (also printed)
#   Benchmarks/results/latency.csv   every latency sample (scenario, receiver, ns)
#   Benchmarks/results/machine.txt   the machine and its load during the run
#   Benchmarks/results/scale.csv     the scale curve (section 9)
#   docs/benchmarks-latency.png      the latency plot
#   docs/benchmarks-scale.png        the scale curve's plot
#
#   scripts/bench.sh            the whole suite: about 1 minute on 2 cores, after the first
#                               release build (a few minutes)
#   scripts/bench.sh --quick    fewer samples, about 20 s, into Benchmarks/results/quick:
#                               a smoke run, figures indicative only
set -euo pipefail
# The benchmarks keep running Hearth as whoever runs them (root, for the namespace): their
# results live in the checkout, and before c04ad9c only root could connect at all, so runs
# before and after it compare only as root. testnet/run.sh would drop to the test user
# otherwise (scripts/user.sh).
export HEARTH_TEST_AS_ROOT=1
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
git diff --quiet HEAD -- . ':!Benchmarks/results' ':!docs/benchmarks-latency.png' ':!docs/benchmarks-scale.png' 2>/dev/null || commit="$commit (with uncommitted changes)"
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
       # A household that does not converge is a finding to report, not a reason to stop.
       scripts/bench-daemon.sh | grep '^|' || echo "| (scripts/bench-daemon.sh failed: the household did not converge; see its output) | |"
     } | tee -a "$out/table.md" ;;
esac

# A device appearing on the LAN (section 10) needs Avahi: in the test network, as root.
case " $* " in
  *" --only "*) ;;
  *) if [ "$(id -u)" -eq 0 ]; then
       export HEARTH_NETNS=hearth-bench HEARTH_TESTNET_DIR=/run/hearth-bench
       if scripts/testnet/up.sh >/dev/null 2>&1; then
         scripts/testnet/run.sh .build-bench/release/hearth-benchmarks --only appear --out "$out/appear" $(case " $* " in *" --quick "*) echo --quick;; esac) \
           | sed -n '/^### 10/,$p' | { echo; cat; } | tee -a "$out/table.md" || true
         scripts/testnet/down.sh >/dev/null 2>&1 || true
       fi
     fi ;;
esac

echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
cat "$out/machine.txt"

plot=docs/benchmarks-latency.png scale_plot=docs/benchmarks-scale.png
if $quick; then plot="$out/benchmarks-latency.png" scale_plot="$out/benchmarks-scale.png"; fi
if [ -s "$out/latency.csv" ] && [ "$(wc -l < "$out/latency.csv")" -gt 1 ]; then python3 scripts/plot-latency.py "$out/latency.csv" "$plot"; fi
if [ -s "$out/scale.csv" ]; then python3 scripts/plot-scale.py "$out/scale.csv" "$scale_plot"; fi
