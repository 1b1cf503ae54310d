import Foundation

/// Edits a store file from outside, with Python's `plistlib`, as a tool or an older build
/// might have written it.
public enum PlantedEntry {
    /// Adds to the replica file at `path` a copy of its first entry under `key`, whose value is
    /// `depth` arrays nested in each other (deeper than a value may be); returns the status and
    /// standard error of the Python run.
    public static func plantDeep(_ depth: Int, key: String = "deep", into path: String) async throws -> (status: Int32?, error: String) {
        let result = try await ChildProcess.run("/usr/bin/env", ["python3", "-c", """
            import plistlib, sys
            d = plistlib.load(open(sys.argv[1], 'rb'))
            v = 1
            for _ in range(int(sys.argv[2])): v = [v]
            e = dict(d['entries'][0]); e['key'] = sys.argv[3]; e['value'] = v; e['sequence'] = 99
            d['entries'].append(e)
            plistlib.dump(d, open(sys.argv[1], 'wb'), fmt=plistlib.FMT_BINARY)
            """, path, String(depth), key])
        return (result.status, result.error)
    }
}
