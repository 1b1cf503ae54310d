#!/usr/bin/env bash
# Two shopping-list "devices" of one throwaway household on 127.0.0.1, playing a script:
# both add items (no conflict), then both edit the same item at once (last writer wins).
set -euo pipefail
cd "$(dirname "$0")/../.."
# HEARTH_SCRATCH: another build folder (swift build --scratch-path), e.g. to share one with the tests.
scratch=(${HEARTH_SCRATCH:+--scratch-path "$HEARTH_SCRATCH"})
for product in hearth hearth-shopping-list; do
  swift build "${scratch[@]}" --product "$product" 2>&1 | grep -E "error:|Build" >&2 || true
done
bin=$(swift build "${scratch[@]}" --show-bin-path)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A throwaway account: "demo" as its passphrase (create warns that it is weak; hidden here).
"$bin/hearth" account create --config-dir "$dir/a" --name Home --passphrase demo --device alice >/dev/null 2>&1
"$bin/hearth" account export --config-dir "$dir/a" --output "$dir/home.bundle" 2>/dev/null
"$bin/hearth" account join "$dir/home.bundle" --passphrase demo --config-dir "$dir/b" --device bob >/dev/null
list() { "$bin/hearth-shopping-list" --config-dir "$dir/$1" --data-dir "$dir/$1/data" --port "$2" --peer "127.0.0.1:$3" --name "$4"; }
{ sleep 1; echo "add milk"; sleep 2; echo "tick 2"; sleep 2; echo quit; } | list a 47421 47422 alice | sed 's/^/alice | /' &
{ sleep 1.5; echo "add bread"; sleep 1.5; echo "rename 2 oat milk"; sleep 2; echo quit; } | list b 47422 47421 bob | sed 's/^/bob   | /' &
wait
