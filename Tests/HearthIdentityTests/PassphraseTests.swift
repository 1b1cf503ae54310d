import Foundation
import HearthIdentity
import Testing

@Suite("Generated and weak passphrases")
struct PassphraseTests {
    @Test("The word list is the EFF large list: 7776 distinct lowercase words")
    func wordList() {
        let words = Passphrase.wordList
        #expect(words.count == 7776)
        #expect(Set(words).count == 7776)
        #expect(words.first == "abacus" && words.last == "zoom")
        #expect(words.allSatisfy { $0.count >= 3 && $0.allSatisfy { $0.isLowercase || $0 == "-" } })
    }

    @Test("A generated passphrase is six words from the list, different each time, and not weak")
    func generated() {
        let list = Set(Passphrase.wordList.map(String.init))
        var seen: Set<String> = []
        for _ in 0..<20 {
            let phrase = Passphrase.generate()
            let words = phrase.split(separator: " ").map(String.init)
            #expect(words.count == 6)
            #expect(words.allSatisfy(list.contains), "\(phrase)")
            #expect(Passphrase.weakness(of: phrase) == nil, "\(phrase)")
            seen.insert(phrase)
        }
        #expect(seen.count == 20)
    }

    @Test("correct horse, short and few-word passphrases are weak")
    func weak() {
        for phrase in ["correct horse", "Correct Horse", "correct horse battery staple", "pw", "s3cret", "Tr0ub4dor&3", "two words here"] {
            #expect(Passphrase.weakness(of: phrase) != nil, "\(phrase)")
        }
        #expect(Passphrase.weakness(of: "tidy kettle orbit lantern") == nil)
    }
}
