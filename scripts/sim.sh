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
#
# The last line is the summary: `sim: N seeds, H simulated device-hours, E events in S s,
# V violations, digest D`; the exit status is non-zero on any violation.
# HEARTH_SIM_DEBUG=1 uses the debug build (.build) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi
if [ "${HEARTH_SIM_DEBUG:-0}" = 1 ]; then
  swift build --product hearth-sim >&2
  binary=.build/debug/hearth-sim
else
  swift build -c release --scratch-path .build-sim --product hearth-sim >&2
  binary=.build-sim/release/hearth-sim
fi
# One process per core unless told (--jobs N, or HEARTH_SIM_JOBS): the output and the digest are
# the same whatever the number.
exec "$binary" --jobs "${HEARTH_SIM_JOBS:-$(nproc)}" "$@"
