#!/usr/bin/env bash
# The demo (README.md): installs what it needs, builds, and runs the local example twice
# with a fresh data directory, so the second run shows what the first one wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

swift build --product hearth-local-demo
demo=$(swift build --show-bin-path)/hearth-local-demo
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

echo "== first run"
XDG_DATA_HOME="$data" "$demo"
echo
echo "== second run: it sees what the first one wrote"
XDG_DATA_HOME="$data" "$demo"
echo
echo "== the store file, read by Python's plistlib"
python3 -c 'import plistlib,sys; d=plistlib.load(open(sys.argv[1],"rb")); print({k: e.get("value") for k, e in sorted(d["entries"].items())})' \
  "$data/hearth/local/com.example.hearth.demo.plist"
