import Foundation

/// A fresh directory under /tmp, removed by the caller with `removeTemporaryDirectory`.
func makeTemporaryDirectory(_ label: String = "hearth-identity") -> URL {
    let url = URL(fileURLWithPath: NSTemporaryDirectory())
        .appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
    try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func removeTemporaryDirectory(_ url: URL) {
    try? FileManager.default.removeItem(at: url)
}

func fileMode(_ url: URL) -> Int {
    var info = stat()
    precondition(stat(url.path, &info) == 0, "stat \(url.path)")
    return Int(info.st_mode & 0o777)
}
