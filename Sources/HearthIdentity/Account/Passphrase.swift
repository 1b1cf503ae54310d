/// Account passphrases (which seal the CA key on every device and in join bundles):
/// generated ones, and a check for weak given ones.
///
/// A copy of a device's `ca.key` or a join bundle that leaks can be attacked offline at the
/// key's scrypt cost per guess (about a second per core with ``ScryptParameters/standard``);
/// six words from the EFF list (77 bits) are out of reach of guessing at any such rate, a
/// short phrase is not.
package enum Passphrase {
    /// The words of a generated passphrase.
    package static let wordCount = 6

    /// The word list generated passphrases are drawn from (the EFF large list).
    package static var wordList: [Substring] { EFFWordList.words }

    /// A new passphrase: ``wordCount`` words from ``wordList``, each drawn uniformly with
    /// `generator`, separated by spaces.
    package static func generate(using generator: inout some RandomNumberGenerator) -> String {
        let words = EFFWordList.words
        return (0..<wordCount).map { _ in String(words[Int.random(in: 0..<words.count, using: &generator)]) }
            .joined(separator: " ")
    }

    /// A new passphrase from the system's CSPRNG (`SystemRandomNumberGenerator`).
    package static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        return generate(using: &generator)
    }

    /// Why `passphrase` is weak, or nil when it is not: shorter than 16 characters,
    /// fewer than 4 words and under 24 characters, or a well-known example.
    package static func weakness(of passphrase: String) -> String? {
        let words = passphrase.split(whereSeparator: { !$0.isLetter && !$0.isNumber })
        let normalised = words.joined(separator: " ").lowercased()
        if commonPassphrases.contains(normalised) {
            return "it is a well-known example passphrase"
        }
        if passphrase.count < 16 { return "it is short (\(passphrase.count) characters; 16 or more, or six random words, resist guessing)" }
        if words.count < 4, passphrase.count < 24 { return "it has few words (\(words.count); six random words resist guessing)" }
        return nil
    }

    /// Passphrases found in examples and on the first pages of guessing lists.
    static let commonPassphrases: Set<String> = [
        "correct horse", "correct horse battery", "correct horse battery staple", "password", "passphrase",
        "letmein", "let me in", "open sesame", "hunter2", "qwerty", "iloveyou", "i love you", "changeme",
        "trustno1", "welcome", "secret", "my secret", "hearth", "home", "family", "123456", "12345678",
        "password123", "admin", "monkey", "dragon", "football", "sunshine", "princess",
    ]
}
