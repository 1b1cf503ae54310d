#!/usr/bin/env bash
# Stress for the release of an attached store (docs/local-attach.md): one `hold` host, then N
# times an app that attaches, writes aI=1 bI=2 aI=3, lets go of the store without
# synchronize() and exits; each time, readers must find aI = 3 and bI = 2 at the host.
#
#   scripts/release-stress.sh [N] [HOGS] [BINARY]
#   defaults: 150 runs, 2 CPU hogs, the ThreadSanitizer build's hearth-test-writer
#   (swift build --sanitize=thread --scratch-path .build-tsan --product hearth-test-writer)
#
# Under ThreadSanitizer with 2 hogs it lost aI = 3 in 5 of 150 runs before the fix of
# LocalClientHandler (a frame arriving after the store was let go closed the connection
# before the deinit's last writes left); 0 of 168 after. Prints "lost K of N"; exits 1 if K > 0.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-150}; hogs=${2:-2}; bin=${3:-.build-tsan/debug/hearth-test-writer}
[ -x "$bin" ] || { echo "no $bin: build it first (see the header)" >&2; exit 64; }
# Run by root, the processes run as the test user (scripts/user.sh), as Hearth runs.
. scripts/user.sh
hearth_user_init
dir=$(mktemp -d /tmp/hearth-release-stress.XXXXXX)
hearth_user_owns "$dir"
app() { "${HEARTH_AS_USER[@]}" env XDG_CONFIG_HOME="$dir/config" "$bin" "$@"; }
echo "release-stress: running as $HEARTH_RUNNER" >&2
pids=()
for _ in $(seq 1 "$hogs"); do ( while :; do :; done ) & pids+=($!); done
# Not through app(): a function in the background is a subshell, whose pid the trap would kill
# while the host went on.
"${HEARTH_AS_USER[@]}" env XDG_CONFIG_HOME="$dir/config" "$bin" hold "$dir" released > "$dir/host.out" 2>&1 & pids+=($!)
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do grep -q "opened released host" "$dir/host.out" && break; sleep 0.1; done
lost=0
for i in $(seq 1 "$runs"); do
  app release "$dir" released "a$i=1" "b$i=2" "a$i=3" > "$dir/app.out" 2>&1
  a=$(app get "$dir" released "a$i" 2>&1); b=$(app get "$dir" released "b$i" 2>&1)
  if [[ "$a" != *"read attached 3"* || "$b" != *"read attached 2"* ]]; then
    lost=$((lost + 1))
    echo "run $i: a: $a | b: $b | app: $(tr '\n' ' ' < "$dir/app.out")"
  fi
done
echo "lost $lost of $runs"
[ "$lost" = 0 ]
