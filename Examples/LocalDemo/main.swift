// A first look at Hearth with no network: each run reads what the previous run wrote,
// then writes its own values through Apple's API. Run it twice (scripts/demo.sh does).
import Foundation
import Hearth

let store = NSUbiquitousKeyValueStore(storeIdentifier: "com.example.hearth.demo")

let launches = store.longLong(forKey: "launches")
print("store file: \(store.fileURL?.path ?? "none (memory only)")")
if launches == 0 {
    print("first run: the store is empty")
} else {
    print("run \(launches + 1): the previous run left")
    for (key, value) in store.dictionaryRepresentation.sorted(by: { $0.key < $1.key }) {
        print("  \(key) = \(value)")
    }
}

store.set(launches + 1, forKey: "launches")
store.set(Int64.random(in: 0...3), forKey: "backgroundColor")
store.set(ProcessInfo.processInfo.processIdentifier.description, forKey: "lastWriterPID")
store.set(["theme": "dark", "fontSize": 14, "bold": true] as [String: Any], forKey: "preferences")

// Apple's limits, enforced: a 65-byte key is refused, and the throwing API says why.
do {
    try store.setValue("x", forKey: String(repeating: "k", count: 65))
} catch {
    print("refused as expected: \(error)")
}

print(store.synchronize() ? "saved: backgroundColor = \(store.longLong(forKey: "backgroundColor"))" : "could not save")
