#!/usr/bin/env python3
"""Package.swift, the source files' imports and docs/architecture.md must agree (issue 15).

  scripts/check-imports.py [--write] [--package-json FILE]

For every target it compares the modules its files import (any `import`, also inside `#if`)
with the dependencies Package.swift declares:
  - an import of a package module or product the target does not declare is an error (it builds
    only because some other dependency drags the module in, and breaks when that one goes);
  - a declared library dependency that no file imports is an error (a dependency that only
    orders the build, an executable a test spawns, is allowed).
Then it compares the block between the `BEGIN/END generated dependencies` markers in
docs/architecture.md with the library targets' declared dependencies; `--write` rewrites it.
Exit status 1 on any mismatch, with one line per problem.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.md")
BEGIN = "<!-- BEGIN generated dependencies (scripts/check-imports.py --write) -->"
END = "<!-- END generated dependencies -->"
# Modules of the toolchain and the platform: importable without a package dependency.
SYSTEM = {
    "Foundation", "FoundationEssentials", "FoundationNetworking", "Dispatch", "Glibc", "Musl",
    "Darwin", "Android", "WinSDK", "Synchronization", "Testing", "XCTest", "os", "_Concurrency",
    "Observation", "PackageDescription",
}
IMPORT = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:public\s+|package\s+|internal\s+|private\s+|fileprivate\s+)?"
                    r"import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)")


def package_description(path):
    if path:
        with open(path) as f:
            return json.load(f)
    out = subprocess.run(["swift", "package", "--package-path", ROOT, "dump-package"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def target_directory(target):
    if target.get("path"):
        return os.path.join(ROOT, target["path"])
    base = "Tests" if target["type"] == "test" else "Sources"
    return os.path.join(ROOT, base, target["name"])


def imports_of(directory):
    found = {}
    for folder, _, files in os.walk(directory):
        for name in files:
            if not name.endswith(".swift"):
                continue
            path = os.path.join(folder, name)
            in_string = False   # inside a multi-line string literal (embedded Python, shell)
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if line.count('"""') % 2 == 1:
                        in_string = not in_string
                        continue
                    match = None if in_string else IMPORT.match(line)
                    if match:
                        found.setdefault(match.group(1), f"{os.path.relpath(path, ROOT)}:{number}")
    return found


def declared(target):
    names = []
    for dependency in target["dependencies"]:
        kind = next(iter(dependency))
        names.append(dependency[kind][0])
    return names


def generated_block(description):
    lines = [BEGIN, "", "| module | depends on (Package.swift) |", "| --- | --- |"]
    for target in description["targets"]:
        if target["type"] not in ("regular", "system") or target.get("path"):
            continue
        dependencies = ", ".join(f"`{name}`" for name in declared(target)) or "nothing"
        lines.append(f"| `{target['name']}` | {dependencies} |")
    lines += ["", END]
    return "\n".join(lines)


def main(argv):
    write = "--write" in argv
    json_path = argv[argv.index("--package-json") + 1] if "--package-json" in argv else None
    description = package_description(json_path)
    targets = {t["name"]: t for t in description["targets"]}
    module_of = {name: name.replace("-", "_") for name in targets}
    problems = []
    for target in description["targets"]:
        if target["type"] == "system":
            continue
        names = declared(target)
        allowed = {module_of.get(n, n) for n in names}
        found = imports_of(target_directory(target))
        for module, where in sorted(found.items()):
            if module in SYSTEM or module in allowed or module == module_of[target["name"]]:
                continue
            problems.append(f"{where}: {target['name']} imports {module}, which Package.swift does not declare for it")
        for name in names:
            if targets.get(name, {}).get("type") == "executable":
                continue   # built first so that a test can spawn it; nothing to import
            if module_of.get(name, name) not in found:
                problems.append(f"Package.swift: {target['name']} declares {name}, which none of its files imports")

    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    block = generated_block(description)
    if BEGIN not in doc or END not in doc:
        problems.append(f"docs/architecture.md: no generated dependency block ({BEGIN})")
    else:
        start, stop = doc.index(BEGIN), doc.index(END) + len(END)
        if doc[start:stop] != block:
            if write:
                with open(DOC, "w", encoding="utf-8") as f:
                    f.write(doc[:start] + block + doc[stop:])
                print("docs/architecture.md: dependency block rewritten")
            else:
                problems.append("docs/architecture.md: the dependency block differs from Package.swift "
                                "(run scripts/check-imports.py --write)")
    for problem in problems:
        print(problem)
    if not problems:
        print(f"imports: {len(targets)} targets agree with Package.swift and docs/architecture.md")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
