#!/usr/bin/env bash
# Builds the DocC documentation of the products (Hearth, HearthTesting) with warnings as
# errors, and fails unless every public symbol of both is documented (issue 15).
#
#   scripts/docs.sh            # HTML in .build/plugins/Swift-DocC/outputs/<target>.doccarchive
#
# The catalogs are Sources/Hearth/Hearth.docc and Sources/HearthTesting/HearthTesting.docc;
# their articles are the app-facing guides (Apple compatibility, testing your app's sync).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for target in Hearth HearthTesting; do
    swift package --disable-sandbox --allow-writing-to-directory "$out" generate-documentation \
        --target "$target" --output-path "$out/$target.doccarchive" \
        --warnings-as-errors --experimental-documentation-coverage --coverage-summary-level brief \
        > "$out/$target.log" 2>&1 || { cat "$out/$target.log"; echo "docs: $target failed" >&2; exit 1; }
    # documentation-coverage.json: one record per symbol, with whether it has an abstract.
    python3 - "$target" "$out/$target.doccarchive/documentation-coverage.json" <<'PY'
import json, sys
target, path = sys.argv[1], sys.argv[2]
records = json.load(open(path))
# Symbols only (not articles or "Equatable Implementations" groups), and not the members the
# standard library's protocols give every conforming type (documented there).
inherited = {"!=(_:_:)", "hashValue", "hash(into:)", "localizedDescription"}
symbols = [r for r in records if r.get("kind", {}).get("isSymbol") and r.get("title") not in inherited]
missing = [r for r in symbols if not r.get("hasAbstract")]
print(f"docs: {target}: {len(symbols) - len(missing)} of {len(symbols)} symbols documented")
for r in missing:
    print(f"  undocumented: {r.get('referencePath') or r.get('title')}")
sys.exit(1 if missing else 0)
PY
done
