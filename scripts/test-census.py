#!/usr/bin/env python3
"""The three figures of issue 27's "tests follow the code", counted on Tests/.

    scripts/test-census.py [--list] [--grep] [ROOT]

1. `eventually(` polls: lines of Tests/ matching `eventually(`, comments and string literals
   left out (`grep -rn 'eventually(' Tests | wc -l` counts those too; `--grep` prints that).
2. Sleeps: lines of Tests/ matching `Task\\.sleep|usleep\\(|[^a-z]sleep\\(`, comments and
   string literals left out (a comment that names `Task.sleep` is not a sleep; `--grep` prints
   what `grep -rnE 'Task\\.sleep|usleep\\(|[^a-z]sleep\\(' Tests | wc -l` counts).
3. Sync tests that need sockets: of the `@Test` functions of Tests/HearthSyncTests, those whose
   body, or what it reaches in the same target, opens a real socket or starts a process.

The heuristic for 3 (read on the source with comments and string literals removed):
- A test needs sockets when its body holds a socket marker, or calls (as `name(`, `Self.name(`
  or `self.name(`, never `other.name(`) a function of the target that needs sockets as called,
  or when its suite's `init(` needs sockets (every test of the suite pays for it).
- Socket markers: the TLS transport and its parts (`PeerTransport`, `PeerConnection`,
  `TLSHandler`), a TCP port (`freePort(`), a process (`ChildProcess`, `PeerProcess`,
  `HearthCLI`, `Process(`), and these calls when made without the in-memory network:
  `LoopbackCluster(`/`withLoopbackCluster(` without a `network:` argument, `SyncEngine(`
  without `environment:`, `HostilePeer(` without `network:` (`HostilePeer(joining: cluster)`
  takes the cluster's network, so it is judged with the cluster).
- A helper function needs sockets when its own body does (by the same rules, recursively);
  a helper that takes a `network` parameter and is called with `network:` is taken to run
  on that network (its socket branch is the one for `network: nil`).
Helpers are looked up in the test's file first, then in the target's files that hold no test
(HostilePeer.swift, PeerProcess.swift, ...), then in the others (CompromisedDeviceTests.swift's
`Household`, used by PeerFloodLiveTests). The figure is an estimate by reading the source; `--list`
prints each test it counts with the reason, to check it by eye.
"""
import os
import re
import sys

EVENTUALLY = re.compile(r"eventually\(")
SLEEP = re.compile(r"Task\.sleep|usleep\(|[^a-z]sleep\(")

PLAIN_MARKERS = [
    (re.compile(r"\bPeerTransport\b"), "PeerTransport (TLS over TCP)"),
    (re.compile(r"\bPeerConnection\b"), "PeerConnection (TLS over TCP)"),
    (re.compile(r"\bTLSHandler\b"), "TLSHandler"),
    (re.compile(r"\bfreePort\("), "a TCP port (freePort)"),
    (re.compile(r"\bChildProcess\b"), "a child process (ChildProcess)"),
    (re.compile(r"\bPeerProcess\b"), "a peer process (PeerProcess)"),
    (re.compile(r"\bHearthCLI\b"), "the hearth command (HearthCLI)"),
    (re.compile(r"(?<![\w.])Process\(\)"), "a process (Process())"),
]
# (call, argument that makes it in-memory, reason)
CALL_MARKERS = [
    ("withLoopbackCluster", ("network:",), "withLoopbackCluster without network: (TLS cluster)"),
    ("LoopbackCluster", ("network:",), "LoopbackCluster without network: (TLS cluster)"),
    ("SyncEngine", ("environment:",), "SyncEngine without environment: (TLS on TCP)"),
    ("HostilePeer", ("network:", "joining:"), "HostilePeer without network: (TLS)"),
]


def strip(source):
    """The source with comments and string literals blanked (newlines kept)."""
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * source.count("\n", i, j))
            i = j
        elif source.startswith('"""', i):
            j = source.find('"""', i + 3)
            j = n if j < 0 else j + 3
            out.append('""' + "\n" * source.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            depth = 0
            while j < n:
                if source[j] == "\\" and j + 1 < n and source[j + 1] == "(":
                    depth += 1
                    j += 2
                    continue
                if source[j] == "\\":
                    j += 2
                    continue
                if depth and source[j] == ")":
                    depth -= 1
                elif not depth and source[j] in '"\n':
                    break
                j += 1
            out.append('""')
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(text, start, open_char, close_char):
    """Index past the bracket closing the one at `start`."""
    depth = 0
    for k in range(start, len(text)):
        if text[k] == open_char:
            depth += 1
        elif text[k] == close_char:
            depth -= 1
            if depth == 0:
                return k + 1
    return len(text)


FUNC = re.compile(r"(?<![\w.])(?:func\s+(\w+)\s*(?:<[^>]*>)?|init[?!]?\s*(?:<[^>]*>)?)\(")
TYPE = re.compile(r"^[ \t]*(?:[\w@]+\s+)*(struct|class|actor|enum|extension)\s+(\w+)", re.M)
DECLARATION_TAIL = re.compile(r"[\s\w\->\[\]():,.<>?&@]*")


class Function:
    def __init__(self, name, params, body, is_test, start, path):
        self.name, self.params, self.body, self.is_test, self.start, self.path = name, params, body, is_test, start, path


def functions(path):
    """The file's stripped text, its functions and initializers (a test is the first `func`
    after an `@Test`), and its type declarations as (start, end, name)."""
    text = strip(open(path, encoding="utf-8").read())
    tests = [m.start() for m in re.finditer(r"@Test\b", text)]
    found = []
    for m in FUNC.finditer(text):
        paren = m.end() - 1
        params_end = matching(text, paren, "(", ")")
        brace = text.find("{", params_end)
        between = text[params_end:brace]
        if brace < 0 or not DECLARATION_TAIL.fullmatch(between) or re.search(r"\b(func|var|let|case)\b", between):
            continue    # a requirement without a body
        end = matching(text, brace, "{", "}")
        found.append(Function(m.group(1) or "init", text[paren:params_end], text[brace:end], False, m.start(), path))
    for position in tests:
        following = [f for f in found if f.start > position and f.name != "init"]
        if following:
            min(following, key=lambda f: f.start).is_test = True
    types = []
    for m in TYPE.finditer(text):
        brace = text.find("{", m.end())
        if brace >= 0:
            types.append((m.start(), matching(text, brace, "{", "}"), m.group(2)))
    return text, found, types


def calls(body, name):
    """The argument lists of each call of `name` in `body`."""
    for m in re.finditer(r"(?:(?<![\w.])|(?<=\bSelf\.)|(?<=\bself\.))" + re.escape(name) + r"\s*[({]", body):
        paren = m.end() - 1
        yield body[paren:matching(body, paren, *("()" if body[paren] == "(" else "{}"))]


def sync_census(root):
    target = os.path.join(root, "Tests", "HearthSyncTests")
    files = sorted(os.path.join(target, f) for f in os.listdir(target) if f.endswith(".swift"))
    parsed = {path: functions(path) for path in files}
    support = [path for path, (_, funcs, _) in parsed.items() if not any(f.is_test for f in funcs)]
    memo = {}

    def helpers_for(path):
        """name -> the functions a call of it may run: a function of the target (the test's
        file first), or a type of the target (its initializers)."""
        table = {}
        for p in [path] + [q for q in support if q != path] + [q for q in files if q != path and q not in support]:
            _, funcs, types = parsed[p]
            for f in funcs:
                if not f.is_test and f.name != "init" and f.name not in table:
                    table[f.name] = [f]
            for start, end, name in types:
                inits = [f for f in funcs if f.name == "init" and start <= f.start < end]
                if inits and name not in table and name not in {c[0] for c in CALL_MARKERS}:
                    table[name] = inits
        return table

    def reasons(body, path, seen):
        found = []
        for pattern, why in PLAIN_MARKERS:
            if pattern.search(body):
                found.append(why)
        for name, exempt, why in CALL_MARKERS:
            for arguments in calls(body, name):
                if not any(e in arguments for e in exempt):
                    found.append(why)
                    break
        for name, candidates in helpers_for(path).items():
            for arguments in calls(body, name):
                for helper in candidates:
                    key = (helper.path, helper.start)
                    if key in seen or ("network" in helper.params and "network:" in arguments):
                        continue
                    if key not in memo:
                        memo[key] = reasons(helper.body, helper.path, seen | {key})
                    if memo[key]:
                        found.append(f"{name}(): " + memo[key][0])
                        break
                break
        return found

    tests = []
    for path in files:
        text, funcs, types = parsed[path]
        for f in funcs:
            if not f.is_test:
                continue
            why = reasons(f.body, path, frozenset())
            suite = next(((s, e, n) for s, e, n in types if s <= f.start < e), None)
            if suite:
                for g in funcs:
                    if g.name == "init" and suite[0] <= g.start < suite[1]:
                        why += [f"{suite[2]}.init: " + r for r in reasons(g.body, path, frozenset())]
            tests.append((os.path.relpath(path, root), f.name, why))
    return tests


def count_lines(root, pattern, code_only=True):
    total = 0
    for directory, _, names in os.walk(os.path.join(root, "Tests")):
        for name in names:
            try:
                with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            if code_only and name.endswith(".swift"):
                text = strip(text)
            total += sum(1 for line in text.splitlines() if pattern.search(line))
    return total


def main(argv):
    listing = "--list" in argv
    code_only = "--grep" not in argv
    rest = [a for a in argv if a not in ("--list", "--grep")]
    root = rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    tests = sync_census(root)
    needing = [t for t in tests if t[2]]
    print(f"eventually( in Tests: {count_lines(root, EVENTUALLY, code_only)}")
    print(f"sleeps in Tests: {count_lines(root, SLEEP, code_only)}")
    print(f"sync tests that need sockets: {len(needing)} of {len(tests)}")
    if listing:
        for path, name, why in needing:
            print(f"  {path} {name}: {'; '.join(dict.fromkeys(why))}")


if __name__ == "__main__":
    main(sys.argv[1:])
