#!/usr/bin/env bash
# One device of a busy household, measured (docs/benchmarks.md, "The daemon"): N devices
# (default 9: one measured, 8 peers) each run `hearth daemon` holding S stores (default 20).
# In the test network's namespace (root) they find each other by mDNS; otherwise static peers
# on 127.0.0.1. Once every device holds every store with nothing pending, the measured
# device's daemon idles for --seconds (default 60) and the script prints: its TLS connections
# (ss), the _hearth._tcp services mDNS shows (avahi-browse), its CPU over the idle period, its
# wake-ups (voluntary context switches of all its threads) and its RSS.
#
#   scripts/bench-daemon.sh [--devices N] [--stores S] [--seconds T]
set -euo pipefail
# The benchmarks keep running Hearth as whoever runs them (root, for the namespace): their
# results live in the checkout, and before c04ad9c only root could connect at all, so runs
# before and after it compare only as root. testnet/run.sh would drop to the test user
# otherwise (scripts/user.sh).
export HEARTH_TEST_AS_ROOT=1
cd "$(dirname "$0")/.."
. scripts/setup.sh

devices=9 stores=20 seconds=60
while [ $# -gt 0 ]; do
  case $1 in
    --devices) devices=$2; shift 2;;
    --stores) stores=$2; shift 2;;
    --seconds) seconds=$2; shift 2;;
    *) echo "usage: $0 [--devices N] [--stores S] [--seconds T]" >&2; exit 2;;
  esac
done

swift build -c release --scratch-path .build-bench --product hearth >/dev/null
hearth=$(swift build -c release --scratch-path .build-bench --show-bin-path)/hearth

work=$(mktemp -d)
pids=()
namespace=0
cleanup() {
  # The daemons run under wrappers (run_as, run.sh): find them by their folders.
  pkill -TERM -f -- "--config-dir $work/" 2>/dev/null || true
  for _ in $(seq 100); do pgrep -f -- "--config-dir $work/" >/dev/null || break; sleep 0.1; done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ "$namespace" -eq 1 ] && scripts/testnet/down.sh >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
export HEARTH_NETNS=hearth-bench HEARTH_TESTNET_DIR=/run/hearth-bench
if [ "$(id -u)" -eq 0 ] && scripts/testnet/up.sh >/dev/null 2>&1; then namespace=1; fi

port() { echo $((47700 + $1)); }
# hearth as device I: its folders, its runtime folder (a daemon each), in the namespace if any.
run_as() {
  local i=$1; shift
  mkdir -p "$work/d$i/run"
  local where=(--config-dir "$work/d$i/config" --data-dir "$work/d$i/data")
  if [ "$namespace" -eq 1 ]; then
    scripts/testnet/run.sh env XDG_RUNTIME_DIR="$work/d$i/run" "$hearth" "$@" "${where[@]}"
  else
    env XDG_RUNTIME_DIR="$work/d$i/run" "$hearth" "$@" "${where[@]}"
  fi
}
peers_of() {
  [ "$namespace" -eq 1 ] && return 0
  for j in $(seq 0 $((devices - 1))); do [ "$j" = "$1" ] || printf -- '--peer 127.0.0.1:%s ' "$(port "$j")"; done
}

echo "== $devices devices, $stores stores each ($([ "$namespace" -eq 1 ] && echo "mDNS in namespace $HEARTH_NETNS" || echo "static peers on 127.0.0.1"))"
run_as 0 account create --name Bench --passphrase "bench passphrase for a test household" --device d0 >/dev/null
run_as 0 account export --output "$work/bundle" >/dev/null 2>&1
for i in $(seq 1 $((devices - 1))); do
  run_as "$i" account join "$work/bundle" --passphrase "bench passphrase for a test household" --device "d$i" >/dev/null &
done
wait
# Every device writes one key to each store, offline.
for i in $(seq 0 $((devices - 1))); do
  for s in $(seq 1 "$stores"); do run_as "$i" set --store "com.example.s$s" "from-d$i" "$i" --wait 0 >/dev/null 2>&1; done
done
for i in $(seq 0 $((devices - 1))); do
  # shellcheck disable=SC2046
  run_as "$i" daemon --port "$(port "$i")" $(peers_of "$i") --rescan-interval 30 >"$work/d$i.log" 2>&1 &
  pids+=($!)
done

echo "== waiting until every device holds every store with every key and nothing pending"
start=$(date +%s)
while :; do
  done_all=1
  for i in $(seq 0 $((devices - 1))); do
    status=$(run_as "$i" status --json 2>/dev/null || true)
    n=$( (grep -o "\"keys\":$devices,\"usageBytes\":[0-9]*,\"pending\":0," <<<"$status" || true) | wc -l)
    [ "$n" -eq "$stores" ] || { done_all=0; break; }
  done
  [ "$done_all" -eq 1 ] && break
  if [ $(( $(date +%s) - start )) -gt "${HEARTH_BENCH_CONVERGE_SECONDS:-300}" ]; then
    # On stderr: the caller (bench.sh) keeps only the table rows of stdout.
    { echo "not converged after ${HEARTH_BENCH_CONVERGE_SECONDS:-300} s; the first device that is not, d$i:"
      run_as "$i" status 2>&1 | grep -v prohibited | grep -B2 'pending: [1-9]' | head -6
      run_as "$i" peers 2>&1 | grep -v prohibited | head -20
      echo "its daemon's log:"; tail -20 "$work/d$i.log"; } >&2
    exit 1
  fi
  sleep 1
done
echo "   converged in $(( $(date +%s) - start )) s"
sleep 5

daemon=$(cat "$work/d0/run/hearth/daemon.lock" | tr -d '\n')
in_ns() { if [ "$namespace" -eq 1 ]; then ip netns exec "$HEARTH_NETNS" "$@"; else "$@"; fi; }
cpu() { awk '{print $14 + $15}' "/proc/$daemon/stat"; }
# Per thread "TID count": a thread that ends during the window must not subtract its count.
wakeups() { for t in /proc/"$daemon"/task/*; do echo "${t##*/} $(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null) $(cat "$t/comm" 2>/dev/null | tr ' ' _)"; done; }
ticks=$(getconf CLK_TCK)
cpu0=$(cpu); wakeups >"$work/wake0"
sleep "$seconds"
cpu1=$(cpu); wakeups >"$work/wake1"
# Threads alive at both ends: their switches in between; a thread born meanwhile: all of its.
# Which threads woke, by name (to stderr: what to look at when the figure is high).
awk 'NR == FNR {before[$1] = $2; next} $2 != "" {n[$3] += $2 - ($1 in before ? before[$1] : 0)} END {for (k in n) if (n[k] > 0) printf "   %s: %d\n", k, n[k]}' "$work/wake0" "$work/wake1" | sort -t: -k2 -rn >&2
wake=$(awk 'NR == FNR {before[$1] = $2; next} $2 != "" {s += $2 - ($1 in before ? before[$1] : 0)} END {print s + 0}' "$work/wake0" "$work/wake1")
connections=$(in_ns ss -tnpH state established | grep -c "pid=$daemon," || true)
listeners=$(in_ns ss -tlnpH | grep -c "pid=$daemon," || true)
services="n/a (no namespace)"
if [ "$namespace" -eq 1 ]; then
  services=$(scripts/testnet/run.sh avahi-browse -rpt _hearth._tcp 2>/dev/null | grep '^=' | cut -d';' -f4 | sort -u | wc -l)
fi
rss=$(awk '/^VmRSS/ {print $2 " " $3}' "/proc/$daemon/status")
awk -v c0="$cpu0" -v c1="$cpu1" -v t="$ticks" -v s="$seconds" -v w="$wake" \
    -v conn="$connections" -v lis="$listeners" -v svc="$services" -v rss="$rss" -v d="$devices" -v st="$stores" 'BEGIN {
  printf "| measured device: %d stores, %d peer devices | figure |\n| --- | --- |\n", st, d - 1
  printf "| TLS connections of its daemon (ss, established) | %d |\n", conn
  printf "| listening sockets of its daemon | %d |\n", lis
  printf "| _hearth._tcp services on the network (avahi-browse, all %d devices) | %s |\n", d, svc
  printf "| idle CPU over %d s | %.3f %% of a core (%.2f s) |\n", s, (c1 - c0) / t / s * 100, (c1 - c0) / t
  printf "| wake-ups (voluntary context switches, all threads) | %.1f per second |\n", w / s
  printf "| RSS | %s |\n", rss
}'
