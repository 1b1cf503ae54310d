#!/usr/bin/env bash
# The mutation check of the household simulator (issue 28, docs/simulator.md "Mutants"): each
# scripts/mutants/*.patch plants one one-line bug in the protocol or the replica; this applies
# each in turn to a copy of the sources (.build-mutants/src, never this tree), builds hearth-sim
# there, and runs the CI budget's seeds (scripts/sim.sh --ci) one by one until one fails.
# Per mutant it prints whether the simulator killed it, the seed and invariant that did, and the
# time to the kill (wall seconds of the seeds run, one process); then a count. The exit status is
# non-zero if any mutant survived (or did not apply or build).
#
#   scripts/mutants.sh                    every mutant
#   scripts/mutants.sh 03 08              the mutants whose file names start so
#   HEARTH_SIM_DEBUG=1 scripts/mutants.sh the debug build instead of the release one
#
# It takes a build per mutant (incremental: a minute or a few) plus its seeds; the table of
# the last full run is in docs/simulator.md. Not run by scripts/test.sh (too long).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi
root=$PWD
work=$root/.build-mutants
src=$work/src
# The CI budget (one place: scripts/sim.sh --ci): its seeds and its settings.
read -r -a budget <<<"$(scripts/sim.sh --print-ci-budget)"
seeds=${budget[0]}
settings=("${budget[@]:1}")

if [ "${HEARTH_SIM_DEBUG:-0}" = 1 ]; then
  build=(swift build --scratch-path "$work/build" --product hearth-sim)
  binary=$work/build/debug/hearth-sim
else
  build=(swift build -c release --scratch-path "$work/build" --product hearth-sim)
  binary=$work/build/release/hearth-sim
fi

# The copy: every file of the package that differs from this tree's is copied again (with a new
# modification time, so that the build sees it changed: a restored file must never look older
# than the objects its mutant left).
sync_copy() {
  mkdir -p "$src"
  (cd "$root" && find Package.swift Package.resolved Sources Tests Examples Fuzz Benchmarks -type f 2>/dev/null) | while read -r f; do
    if ! cmp -s "$root/$f" "$src/$f"; then
      mkdir -p "$src/$(dirname "$f")"
      cp "$root/$f" "$src/$f"
    fi
  done
}
# Whatever happens, the copy ends unmutated (this tree is never touched).
trap sync_copy EXIT

patches=()
if [ $# -eq 0 ]; then
  patches=(scripts/mutants/*.patch)
else
  for prefix in "$@"; do patches+=(scripts/mutants/"$prefix"*.patch); done
fi

killed=0
total=0
started=$(date +%s)
printf '%-32s %-8s %-6s %-28s %s\n' mutant result seed invariant "seconds to the kill"
for patch in "${patches[@]}"; do
  name=$(basename "$patch" .patch)
  total=$((total + 1))
  sync_copy
  if ! patch -s -p1 -d "$src" <"$patch" >"$work/$name.patch.log" 2>&1; then
    printf '%-32s %s\n' "$name" "DOES NOT APPLY ($work/$name.patch.log)"
    continue
  fi
  if ! (cd "$src" && "${build[@]}") >"$work/$name.build.log" 2>&1; then
    printf '%-32s %s\n' "$name" "BUILD FAILED ($work/$name.build.log)"
    continue
  fi
  result=survived seed=- invariant=- seconds=0
  t0=$(date +%s.%N)
  for s in $(seq 1 "$seeds"); do
    status=0
    # --fail-fast: the seed's workload ends at its first violation (the kill's time, not the seed's).
    "$binary" --seed "$s" "${settings[@]}" --fail-fast >"$work/$name.out" 2>&1 || status=$?
    if [ "$status" = 1 ]; then
      result=killed seed=$s
      # The seed's first violation: the line after "FAILED seed …", "  invariant: detail".
      invariant=$(grep -A1 '^FAILED seed' "$work/$name.out" | sed -n 2p | sed 's/^  //; s/:.*//' | tr ' ' '_')
      break
    elif [ "$status" != 0 ]; then
      result="error (status $status, $work/$name.out)" seed=$s
      break
    fi
  done
  seconds=$(echo "$(date +%s.%N) - $t0" | bc)
  [ "$result" = killed ] && killed=$((killed + 1))
  printf '%-32s %-8s %-6s %-28s %.1f\n' "$name" "$result" "$seed" "$invariant" "$seconds"
done
echo "mutants: $killed of $total killed within the CI budget ($seeds seeds, ${settings[*]}), in $(( $(date +%s) - started )) s"
[ "$killed" = "$total" ]
