import Foundation

/// Who runs the tests (issue 26, "Run as users run it"). Hearth runs as an ordinary user, and
/// root hides what such a user meets (a socket option only root may set made every connection
/// fail for everyone else, unseen while everything ran as root). So the suite runs as an
/// unprivileged user (scripts/test.sh drops to `hearth-test`), and a test that finds itself,
/// or a Hearth process it started, running as root fails, unless `HEARTH_TEST_AS_ROOT=1` says
/// root is intended (scripts/test.sh sets it for the few tests that build network namespaces
/// or switch users, which need root for the harness, not for Hearth).
public enum RunningUser {
    /// The real uid of this test process is 0.
    public static var isRoot: Bool { getuid() == 0 }

    /// `HEARTH_TEST_AS_ROOT=1`: running as root is intended (and proves nothing about users).
    public static var rootIntended: Bool { ProcessInfo.processInfo.environment["HEARTH_TEST_AS_ROOT"] == "1" }

    /// What a test says when it runs as root without the opt-in.
    public static let rootRefusal = "running as root: Hearth runs as an ordinary user, and root hides what such a user meets "
        + "(a socket option only root may set made every connection fail for everyone else). Run the tests "
        + "through scripts/test.sh (which drops to the hearth-test user) or as your own user; set "
        + "HEARTH_TEST_AS_ROOT=1 only if root is intended"

    /// The real uid of process `pid` (the `Uid:` line of /proc/PID/status), nil if it is gone.
    public static func uid(of pid: pid_t) -> uid_t? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }),
              let real = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first else { return nil }
        return uid_t(real)
    }
}
