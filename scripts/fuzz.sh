#!/usr/bin/env bash
# Builds the fuzz targets (Fuzz/, docs/security.md "Fuzzing") with libFuzzer and
# AddressSanitizer, and runs each for a while:
#
#   scripts/fuzz.sh [--minutes N | --seconds N] [target...]
#
# Targets: sync-message binary-plist frames txt-record join-bundle store-file (default: all).
# Each starts from seeds the library generates (valid encodings of its kind) plus the
# corpus kept from earlier runs under $BUILD/corpus/<target>, first replays
# Fuzz/regressions/<target>/, and runs under a memory budget (-rss_limit_mb, -malloc_limit_mb)
# so that an input that expands far past its size counts as a crash. Prints per target the
# executions, coverage (cov: edges, ft: features) and crashes; exits 1 if any crashed.
# Crash inputs are kept in $BUILD/artifacts/<target>/: fix the bug, then add the input to
# Fuzz/regressions/<target>/ (the unit test FuzzRegressionTests replays them).
#
# Run as root, it builds as root and runs the targets as the test user (scripts/user.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/user.sh
hearth_user_init

ALL=(sync-message binary-plist frames txt-record join-bundle store-file)
seconds=60
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) seconds=$(( $2 * 60 )); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz: unknown target $t (one of: ${ALL[*]})" >&2; exit 2; }
done

# Budgets: 512 MB of RSS, no single allocation over 256 MB, 10 s per input, inputs up to
# 128 KB (a few times the regression inputs, far below the 4 MiB frame cap).
RSS_MB=${HEARTH_FUZZ_RSS_MB:-512}
MALLOC_MB=${HEARTH_FUZZ_MALLOC_MB:-256}
BUILD=${HEARTH_FUZZ_BUILD:-.build-fuzz}

echo "fuzz: building hearth-fuzz with -sanitize=fuzzer,address in $BUILD" >&2
HEARTH_FUZZ=1 swift build --build-path "$BUILD" --product hearth-fuzz -Xswiftc -sanitize=fuzzer,address >&2
bin="$BUILD/debug/hearth-fuzz"
echo "fuzz: running the targets as $HEARTH_RUNNER" >&2

# Swift's crash backtracer would hold a crashing input's process for up to 30 s.
export SWIFT_BACKTRACE=enable=no
# Swift's runtime keeps metadata caches for the life of the process: not leaks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=0}

summary=()
failed=0
for t in "${targets[@]}"; do
  corpus="$BUILD/corpus/$t" artifacts="$BUILD/artifacts/$t" log="$BUILD/logs/$t.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  # The target writes its corpus and crash inputs (the logs are written by this shell).
  hearth_user_owns "$corpus" "$artifacts"
  HEARTH_FUZZ_TARGET=$t HEARTH_FUZZ_SEEDS="$corpus" "${HEARTH_AS_USER[@]}" "$bin" >/dev/null 2>&1 || { echo "fuzz: $t: writing seeds failed" >&2; exit 1; }
  budget=(-rss_limit_mb="$RSS_MB" -malloc_limit_mb="$MALLOC_MB" -timeout=10 -max_len=131072)

  # The regression inputs first, under the same budget.
  regressions=(Fuzz/regressions/"$t"/*)
  if [ -e "${regressions[0]}" ]; then
    if ! HEARTH_FUZZ_TARGET=$t "${HEARTH_AS_USER[@]}" "$bin" "${budget[@]}" -artifact_prefix="$artifacts/" "${regressions[@]}" >"$log.regressions" 2>&1; then
      echo "fuzz: $t: a regression input fails; see $log.regressions" >&2
      failed=1
    fi
  fi

  echo "fuzz: $t for $seconds s" >&2
  status=0
  HEARTH_FUZZ_TARGET=$t "${HEARTH_AS_USER[@]}" "$bin" "${budget[@]}" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || status=$?
  execs=$(awk '/^stat::number_of_executed_units:/ {print $2}' "$log" | tail -1)
  rss=$(awk '/^stat::peak_rss_mb:/ {print $2}' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  crashes=$(grep -cE '^==[0-9]+==ERROR|^SUMMARY: libFuzzer|ERROR: libFuzzer' "$log" || true)
  if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    echo "fuzz: $t: crashed (status $status); input in $artifacts/, log $log" >&2
    grep -E 'ERROR|SUMMARY|Test unit written' "$log" | head -5 >&2 || true
  fi
  summary+=("$(printf '%-13s %6s s %12s %7s %7s %10s %8s %s' "$t" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${rss:-?}" "$crashes")")
done

printf '%-13s %8s %12s %7s %7s %10s %8s %s\n' target time executions cov ft corpus "rss(MB)" crashes
printf '%s\n' "${summary[@]}"
exit $failed
