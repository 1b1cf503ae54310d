import Foundation
import HearthTestSupport
import HearthTesting
import Testing

/// Issue 14's pairing across two virtual hosts (scripts/testnet/multihost.sh), each with its own
/// network namespace, /run, D-Bus and avahi-daemon: `hearth account join --pair` on kitchen,
/// `hearth device approve` on laptop, which finds it by mDNS alone. The per-host script,
/// scripts/testnet/pairing.sh, plays both people (each types the code the other device shows,
/// or a wrong one) and prints one check per line; this test reads them.
@Suite("Pairing on two virtual hosts")
struct PairingCommandTests {
    @Test("kitchen joins through hearth device approve on laptop with matching codes, then they sync; a mismatched code on either side or a wrong passphrase admits nothing",
          .enabled(if: getuid() == 0, "building host namespaces needs root"),
          .enabled(if: HearthCLI.binary != nil, "swift build first"),
          .timeLimit(.minutes(4)))
    func pairing() async throws {
        let run = try await MultiHostRun.run(hosts: 2, script: "pairing.sh", arguments: [try #require(HearthCLI.binary)],
                                             timeout: .seconds(220))
        let check = run.check
        let context = run.output
        // Every round showed the same code on both screens: nobody in the middle.
        for round in ["wrong-code", "newcomer-refuses", "wrong-passphrase", "ok"] {
            #expect(check(1, "\(round)-codes-match") == "yes", "\(round): \(context)")
            #expect(check(2, "\(round)-codes-match") == "yes", "\(round): \(context)")
        }
        // laptop's person types a code that is not kitchen's: both refuse (12), nothing admitted.
        #expect(check(1, "wrong-code-approve-status") == "12", "\(context)")
        #expect(check(2, "wrong-code-join-status") == "12", "\(context)")
        #expect(check(2, "wrong-code-joined") == "no", "\(context)")
        #expect(check(1, "wrong-code-laptop-lists-kitchen") == "0", "\(context)")
        // kitchen's person types a wrong code: the same.
        #expect(check(1, "newcomer-refuses-approve-status") == "12", "\(context)")
        #expect(check(2, "newcomer-refuses-join-status") == "12", "\(context)")
        #expect(check(2, "newcomer-refuses-joined") == "no", "\(context)")
        #expect(check(1, "newcomer-refuses-laptop-lists-kitchen") == "0", "\(context)")
        // Matching codes, a wrong passphrase: approve exits 3 (as every wrong passphrase), kitchen is refused.
        #expect(check(1, "wrong-passphrase-approve-status") == "3", "\(context)")
        #expect(check(2, "wrong-passphrase-join-status") == "12", "\(context)")
        #expect(check(2, "wrong-passphrase-joined") == "no", "\(context)")
        #expect(check(1, "wrong-passphrase-laptop-lists-kitchen") == "0", "\(context)")
        // Matching codes, the right passphrase: kitchen joins laptop's account.
        #expect(check(1, "ok-approve-status") == "0", "\(context)")
        #expect(check(2, "ok-join-status") == "0", "\(context)")
        #expect(check(2, "ok-joined") == "yes", "\(context)")
        #expect(check(1, "ok-laptop-lists-kitchen") == "1", "\(context)")
        #expect(check(2, "kitchen-account") == "same", "\(context)")
        #expect(check(2, "kitchen-ca-key") == "protected", "\(context)")
        #expect(check(2, "kitchen-lists-laptop") == "1", "\(context)")
        #expect(check(2, "kitchen-lists-itself") == "1", "\(context)")
        // And they sync, both ways, found by mDNS.
        #expect(check(2, "sync-laptop-to-kitchen") == "ok", "\(context)")
        #expect(check(1, "sync-kitchen-to-laptop") == "ok", "\(context)")
    }
}

/// The same commands on one machine, without mDNS or root: the new device does not announce
/// itself (`--no-announce`) and the member is given its address (`--address 127.0.0.1:PORT`).
@Suite("Pairing on the loopback interface, by address")
struct PairingByAddressCommandTests {
    /// One round per line of output: `NAME join-status approve-status joined lists-kitchen codes-match`.
    static let script = #"""
        set -u
        cd "$ROOT"
        a=(--config-dir a/c --data-dir a/d); b=(--config-dir b/c --data-dir b/d)
        "$HEARTH" account create --name "Loop home" --device laptop --passphrase "$PASSPHRASE" "${a[@]}" >/dev/null
        code_in() { sed -n 's/^pairing code: \([0-9]\{3\}\) \([0-9]\{3\}\)$/\1\2/p' "$1" | head -n 1; }
        wait_code() { for _ in $(seq 300); do c=$(code_in "$1"); [ -n "$c" ] && { echo "$c"; return; }; sleep 0.1; done; }
        round() {   # round NAME KITCHEN-ANSWER LAPTOP-ANSWER PASSPHRASE PORT ("code": the other side's)
            local name=$1 port=$5 js=0 as=0
            { if [ "$2" = code ]; then wait_code "$name-laptop.out"; else echo "$2"; fi; } |
                "$HEARTH" account join --pair --no-announce --device kitchen --port "$port" --timeout 60 "${b[@]}" >"$name-kitchen.out" 2>"$name-kitchen.err" &
            local join=$!
            for _ in $(seq 100); do grep -q '^listening on port' "$name-kitchen.out" && break; sleep 0.1; done
            { if [ "$3" = code ]; then wait_code "$name-kitchen.out"; else echo "$3"; fi; } |
                "$HEARTH" device approve --address "127.0.0.1:$port" --timeout 30 --passphrase "$4" "${a[@]}" >"$name-laptop.out" 2>"$name-laptop.err" || as=$?
            wait "$join" || js=$?
            local joined=no same=no
            "$HEARTH" account show --json "${b[@]}" | grep -q '"signedIn":{' && joined=yes
            [ -n "$(code_in "$name-kitchen.out")" ] && [ "$(code_in "$name-kitchen.out")" = "$(code_in "$name-laptop.out")" ] && same=yes
            echo "$name $js $as $joined $("$HEARTH" device list "${a[@]}" | grep -c '^kitchen ') $same"
            cat "$name-kitchen.out" "$name-kitchen.err" "$name-laptop.out" "$name-laptop.err" | sed "s/^/  [$name] /" >&2
        }
        round wrong-code code 123456 "$PASSPHRASE" "$PORT1"
        round ok code code "$PASSPHRASE" "$PORT2"
        """#

    @Test("kitchen joins laptop's account at its address when both type the code the other shows; a wrong code admits nothing",
          .enabled(if: HearthCLI.binary != nil, "swift build first"),
          .timeLimit(.minutes(2)))
    func byAddress() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-pair-address-\(UUID())").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        var environment = HearthCLI.environment
        environment["HEARTH"] = HearthCLI.binary
        environment["ROOT"] = root
        environment["PASSPHRASE"] = "a passphrase for pairing by address"
        environment["PORT1"] = String(try LoopbackCluster.freePort())
        environment["PORT2"] = String(try LoopbackCluster.freePort())
        let result = try await ChildProcess.run("/bin/bash", ["-c", Self.script], environment: environment, timeout: .seconds(100))
        let rounds = Dictionary(uniqueKeysWithValues: result.output.split(separator: "\n").map { line in
            let fields = line.split(separator: " ").map(String.init)
            return (fields[0], Array(fields.dropFirst()))
        })
        let context = "\(result.output)\n\(result.error)"
        // laptop's person types a code that is not kitchen's (123456, but for a one-in-a-million
        // accident): both exit 12, kitchen is not signed in, laptop does not list it.
        #expect(rounds["wrong-code"] == ["12", "12", "no", "0", "yes"], "\(context)")
        // Both type the other's code: kitchen joins, laptop lists it.
        #expect(rounds["ok"] == ["0", "0", "yes", "1", "yes"], "\(context)")
    }
}
