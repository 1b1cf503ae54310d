#!/usr/bin/env bash
# Issue 16: a device appearing on the LAN, between hosts that each run their own avahi-daemon
# (the benchmark's section 10 shares one daemon). Run on two virtual hosts by multihost.sh:
#
#   scripts/testnet/multihost.sh -n 2 -4 -- scripts/testnet/appear.sh SHARED HEARTH [ROUNDS]
#
# h1 holds a store and serves it (`hearth serve`, found by mDNS only). h2, ROUNDS times (default
# 10), joins the household as a new device (a fresh folder and key; not timed), then starts
# `hearth watch --create` and times it from the process's start to its first line, the
# `initialSyncChange` of the first delta it applied (its output polled every 5 ms). Prints "appear ROUND MS" per round and
# "appear p50 MS max MS" at the end; exits non-zero if a round takes over 30 s.
set -euo pipefail
shared=$1 hearth=$2 rounds=${3:-10}
. "$(dirname "$0")/host-lib.sh"
passphrase="a household passphrase for the appear run"
store=com.example.appear
serve_pid=""
trap '[ -n "$serve_pid" ] && kill -TERM "$serve_pid" 2>/dev/null; wait 2>/dev/null || true' EXIT

now_ms() { date +%s%3N; }

if [ "$i" = 1 ]; then
    h account create --name "Appear household" --passphrase "$passphrase" --device h1 >/dev/null
    h account export --output "$shared/bundle" >/dev/null 2>&1
    h set --store "$store" greeting --string hello --wait 0 >/dev/null
    "$hearth" serve --store "$store" "${folders[@]}" 2>"$me/serve.log" &
    serve_pid=$!
    sleep 2   # published and announced before anyone looks, as in the benchmark
    flag serving
    await done 600
    exit 0
fi

await serving
times=()
for round in $(seq "$rounds"); do
    dir="$me/device-$round"
    device=(--config-dir "$dir/config" --data-dir "$dir/data")
    "$hearth" account join "$shared/bundle" --passphrase "$passphrase" --device "h$i-$round" "${device[@]}" >/dev/null
    out="$dir/watch.out"
    : > "$out"
    start=$(now_ms)
    "$hearth" watch --store "$store" --create --json "${device[@]}" >"$out" 2>"$dir/watch.log" &
    watch_pid=$!
    # The first line of `watch` is the first applied delta's notification (polled every 5 ms).
    for _ in $(seq 6000); do [ -s "$out" ] && break; sleep 0.005; done
    took=$(( $(now_ms) - start ))
    kill -TERM "$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
    line=$(head -n 1 "$out")
    case "$line" in
        *initialSyncChange*) echo "appear $round $took"; times+=("$took") ;;
        *) echo "FAIL: round $round: no initialSyncChange within 30 s ($line)"; cat "$dir/watch.log"; flag done; exit 1 ;;
    esac
done
flag done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
echo "appear p50 ${sorted[$(( ${#sorted[@]} / 2 ))]} max ${sorted[$(( ${#sorted[@]} - 1 ))]}"
