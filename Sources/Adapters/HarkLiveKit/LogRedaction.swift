import HarkCore

/// Takes credentials out of text that comes from the LiveKit library (its log records and error messages) before
/// it reaches a log line or an error: a room token (a JWT, `eyJ...` in three dot-separated base64url parts) is
/// replaced wherever it appears, so is whatever follows `Bearer ` or a `token=` / `access_token=` query key, and
/// URLs lose their query values (``URLRedaction``). Control characters become `?`; the text is cut at `limit`
/// characters.
public enum LogRedaction {
    /// `text` without credentials, printable, at most `limit` characters long.
    public static func redact(_ text: String, limit: Int = 1024) -> String {
        var out = ""
        var words: [Substring] = []
        words.reserveCapacity(8)
        // Work word by word (space-separated), keeping the separators as they were.
        var index = text.startIndex
        while index < text.endIndex {
            let end = text[index...].firstIndex(where: { $0 == " " || $0 == "\n" || $0 == "\t" }) ?? text.endIndex
            words.append(text[index..<end])
            if end < text.endIndex {
                words.append(text[end...end])
                index = text.index(after: end)
            } else {
                index = end
            }
        }
        var previous: Substring = ""
        for word in words {
            if word == " " || word == "\n" || word == "\t" {
                out += word
                continue
            }
            if previous.lowercased() == "bearer" {
                out += "REDACTED"
            } else {
                out += redactWord(word)
            }
            previous = word
        }
        return URLRedaction.printable(out, limit: limit)
    }

    /// One space-free word: a URL loses its query values; a JWT anywhere in it, or the value after `token=`, goes.
    private static func redactWord(_ word: Substring) -> String {
        var text = String(word)
        if text.contains("://") { text = URLRedaction.redact(text) }
        text = replacingValues(after: "token=", in: text)
        return replacingJWTs(in: text)
    }

    /// `text` with the characters after each `key` (`token=` also ends `access_token=`) up to the next `&`, `"`,
    /// `'`, `,`, `;` or `)` replaced by REDACTED.
    private static func replacingValues(after key: String, in text: String) -> String {
        guard text.contains(key) else { return text }
        var out = ""
        var rest = Substring(text)
        while let range = rest.firstRange(of: key) {
            out += rest[..<range.upperBound]
            let valueEnd =
                rest[range.upperBound...].firstIndex { "&\"',;)".contains($0) } ?? rest.endIndex
            if valueEnd > range.upperBound { out += "REDACTED" }
            rest = rest[valueEnd...]
        }
        return out + rest
    }

    /// `text` with every JWT-shaped run (`eyJ` + base64url, a dot, base64url, a dot, base64url) replaced.
    private static func replacingJWTs(in text: String) -> String {
        guard text.contains("eyJ") else { return text }
        func isBase64URL(_ c: Character) -> Bool {
            c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == "_" || c == "=")
        }
        var out = ""
        var rest = Substring(text)
        while let start = rest.firstRange(of: "eyJ") {
            out += rest[..<start.lowerBound]
            var cursor = start.lowerBound
            var dots = 0
            while cursor < rest.endIndex, isBase64URL(rest[cursor]) || (rest[cursor] == "." && dots < 2) {
                if rest[cursor] == "." { dots += 1 }
                cursor = rest.index(after: cursor)
            }
            if dots == 2 {
                out += "REDACTED-JWT"
            } else {
                out += rest[start.lowerBound..<cursor]
            }
            rest = rest[cursor...]
        }
        return out + rest
    }
}
