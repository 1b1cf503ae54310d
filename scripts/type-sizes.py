#!/usr/bin/env python3
"""The largest types of Sources, counted across their files: for every top-level declaration
(class, struct, enum, actor, extension), the lines from it to the next top-level declaration
of its file (or the file's end), summed per module and type name. Doc comments above a
declaration count with the type before it; a file's imports with its first type. Issue 27's
figure ("the largest type across its files") is the first line.

    scripts/type-sizes.py [FOLDER] [COUNT]      defaults: Sources 12
"""
import collections
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "Sources"
count = int(sys.argv[2]) if len(sys.argv) > 2 else 12
declaration = re.compile(r"^(?:(?:public|package|internal|private|fileprivate|final|open|indirect|nonisolated|@\w+(?:\([^)]*\))?)\s+)*"
                         r"(?:class|struct|enum|actor|extension)\s+([A-Za-z_][A-Za-z0-9_]*)")
sizes = collections.Counter()
for folder, _, files in os.walk(root):
    for name in files:
        # The word list is data (7,786 lines of words), not a type's code.
        if not name.endswith(".swift") or name == "EFFWordList.swift":
            continue
        path = os.path.join(folder, name)
        lines = open(path, encoding="utf-8").read().split("\n")
        module = os.path.relpath(path, root).split(os.sep)[0]
        starts = [(i, m.group(1)) for i, line in enumerate(lines) for m in [declaration.match(line)] if m]
        for k, (start, type_name) in enumerate(starts):
            end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
            sizes[(module, type_name)] += end - (0 if k == 0 else start)
for (module, type_name), lines in sizes.most_common(count):
    print(f"{lines:5d}  {module}.{type_name}")
