#!/usr/bin/env bash
# The test command, several times in a row from fresh clones, with CPU hogs beside it and
# without (issue 11: the suite must hold up on a busy machine). Each run is the whole of
# `CI=true bash .ci/run`; a summary line per run goes to the summary file.
#
#   scripts/streak.sh [--hogs N] [--busy RUNS] [--quiet RUNS] [--summary FILE]
#   defaults: 4 hogs, 3 busy runs, then 3 quiet runs, summary /tmp/streak-summary.txt
#
# Runs take 6-12 minutes quiet and 9-16 with 4 hogs on 2 cores; keep the machine otherwise idle
# (builds beside it make the busy runs longer and the quiet ones not quiet). Logs:
# /tmp/streak-<run>.log. The hogs are stopped after each run, whatever its result.
set -uo pipefail
hogs=4 busy=3 quiet=3 summary=/tmp/streak-summary.txt
while [ $# -gt 0 ]; do
    case "$1" in
        --hogs) hogs=$2; shift 2 ;;
        --busy) busy=$2; shift 2 ;;
        --quiet) quiet=$2; shift 2 ;;
        --summary) summary=$2; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) echo "streak: unknown option $1" >&2; exit 2 ;;
    esac
done
# One streak at a time: a second one would delete the first one's clone under its feet.
exec 9>/tmp/hearth-streak.lock
flock -n 9 || { echo "streak: another streak is running" >&2; exit 2; }
source_repo=$(cd "$(dirname "$0")/.." && pwd)
: > "$summary"
run() {   # run NAME DIR HOGS
    local name=$1 dir=$2 n=$3 pids=()
    for _ in $(seq 1 "$n"); do ( while :; do :; done ) & pids+=($!); done
    local start=$(date +%s)
    (cd "$dir" && CI=true bash .ci/run) > "/tmp/streak-$name.log" 2>&1; local rc=$?
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
    echo "$name commit $(git -C "$dir" rev-parse --short HEAD) hogs=$n exit $rc wall $(( $(date +%s) - start )) s" >> "$summary"
    grep -h "Test run with" "/tmp/streak-$name.log" | sed "s/^/  $name: /" >> "$summary"
}
if [ "$busy" -gt 0 ]; then
    rm -rf /tmp/hearth-streak-busy && git clone -q "$source_repo" /tmp/hearth-streak-busy
    for i in $(seq 1 "$busy"); do run "H$i" /tmp/hearth-streak-busy "$hogs"; done
fi
if [ "$quiet" -gt 0 ]; then
    rm -rf /tmp/hearth-streak-quiet && git clone -q "$source_repo" /tmp/hearth-streak-quiet
    for i in $(seq 1 "$quiet"); do run "Q$i" /tmp/hearth-streak-quiet 0; done
fi
echo done >> "$summary"
