#!/usr/bin/env bash
# Two ColorSync "devices" of one throwaway household, side by side in tmux. Press 0-3 in
# either pane and watch the other follow; q in both panes (or Ctrl-b d) to leave.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v tmux >/dev/null || { echo "try-two: needs tmux (apt-get install tmux)" >&2; exit 1; }
# HEARTH_SCRATCH: another build folder (swift build --scratch-path), e.g. to share one with the tests.
scratch=(${HEARTH_SCRATCH:+--scratch-path "$HEARTH_SCRATCH"})
for product in hearth hearth-color-sync; do
  swift build "${scratch[@]}" --product "$product" 2>&1 | grep -E "error:|Build" >&2 || true
done
bin=$(swift build "${scratch[@]}" --show-bin-path)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A throwaway account: "demo" as its passphrase (create warns that it is weak; hidden here).
"$bin/hearth" account create --config-dir "$dir/a" --name Home --passphrase demo --device laptop >/dev/null 2>&1
"$bin/hearth" account export --config-dir "$dir/a" --output "$dir/home.bundle" 2>/dev/null
"$bin/hearth" account join "$dir/home.bundle" --passphrase demo --config-dir "$dir/b" --device kitchen >/dev/null
run() { echo "$bin/hearth-color-sync --config-dir $dir/$1 --data-dir $dir/$1/data --port $2 --peer 127.0.0.1:$3 --defaults-suite colorsync-$1"; }
env -u TMUX tmux -L hearth-colorsync new-session -s colorsync "$(run a 47411 47412)" \; split-window -h "$(run b 47412 47411)"
