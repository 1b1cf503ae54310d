#!/usr/bin/env bash
# The household simulator (docs/simulator.md): a household of devices running the production
# sync engine on one thread, a virtual clock and an in-memory LAN, with faults drawn from a seed,
# checked by invariants. Builds hearth-sim in release mode (scratch path .build-sim, apart from
# the test builds), then runs it with these arguments:
#
#   scripts/sim.sh                        seeds 1…10, 8 devices, 1 simulated hour each
#   scripts/sim.sh --seeds 50 --hours 2   more
#   scripts/sim.sh --seed 7 --trace       replay seed 7, printing every event
#   scripts/sim.sh --seed 7 --twice       run seed 7 twice; fail unless the digests agree
#   scripts/sim.sh --clock-faults         add clock jumps to the faults (docs/simulator.md, "Findings")
#   scripts/sim.sh --removals             add device removals (--thief: and thieves' copies; "Findings")
#   scripts/sim.sh --ci                   the CI budget (below; scripts/test.sh runs it)
#   scripts/sim.sh --seed 7 --devices 8 --hours 1 --plant drop-remote-deletes --shrink
#                                         shrink a failing run: the smallest run of seed 7 found that
#                                         fails with the same invariant (fail-fast, fault kinds off,
#                                         fewer devices, fewer hours), then its trace and replay command
#                                         (docs/simulator.md, "Shrinking")
#
# The last line is the summary: `sim: N seeds, H simulated device-hours, E events in S s,
# V violations, digest D`; the exit status is non-zero on any violation.
# HEARTH_SIM_DEBUG=1 uses the debug build (.build) instead (the CI budget runs on it: the test
# build makes it, and a release build would add minutes to CI).
set -euo pipefail
cd "$(dirname "$0")/.."
# The CI budget (issue 28: a fixed budget of seeds within 4 minutes on 2 cores; docs/simulator.md
# "The CI budget"): `scripts/sim.sh --ci` runs it (scripts/test.sh does), scripts/mutants.sh
# kills its mutants within it, `--print-ci-budget` prints it (the seeds, then the settings).
ci_seeds=20
ci_settings=(--devices 8 --hours 1)
case "${1:-}" in
  --print-ci-budget) echo "$ci_seeds ${ci_settings[*]}"; exit 0 ;;
  --ci) shift; set -- --seeds "$ci_seeds" "${ci_settings[@]}" "$@" ;;
esac
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi
if [ "${HEARTH_SIM_DEBUG:-0}" = 1 ]; then
  # HEARTH_SIM_BUILT=1: built already (scripts/test.sh runs it as the test user, after its build).
  [ "${HEARTH_SIM_BUILT:-0}" = 1 ] || swift build --product hearth-sim >&2
  binary=.build/debug/hearth-sim
else
  swift build -c release --scratch-path .build-sim --product hearth-sim >&2
  binary=.build-sim/release/hearth-sim
fi
# One process per core unless told (--jobs N, or HEARTH_SIM_JOBS): the output and the digest are
# the same whatever the number.
exec "$binary" --jobs "${HEARTH_SIM_JOBS:-$(nproc)}" "$@"
