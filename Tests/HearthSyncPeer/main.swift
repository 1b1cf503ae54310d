// A sync peer process for the multi-process tests (Tests/HearthSyncTests/ProcessTests.swift).
//
//   hearth-sync-peer --data DIR --config DIR --name NAME [--port P] [--peer HOST:PORT]… [--avahi] [--write]
//                    [--interval MS] [--timeout MS]
//
// Opens the store "com.example.processes" with sync, prints "listening PORT", and every 100 ms
// saves a snapshot of its values to DIR/snapshot.bplist. With --write it writes NAME-counter
// (continuing from what its store holds) every --interval ms (default 5) and prints "confirmed N"
// after each synchronize()
// that returned true. SIGUSR1 stops writing; SIGTERM saves and exits.
Peer.run()
