import Foundation
import HarkPlatform
import HarkTestKit
import Testing

/// HarkPlatform's SHA-256 and HMAC-SHA256 (the LiveKit helper's development tokens are signed with it), against
/// values that share no code with it: the published vectors of RFC 4231 and FIPS 180-4, and Python's `hmac` and
/// `hashlib` run by the test.
@Suite struct HMACTests {
    /// `text` of hex digits as bytes.
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map {
            UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
        }
    }

    /// `bytes` as lowercase hex.
    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    @Test func sha256MatchesFIPSVectors() {
        #expect(Self.hex(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.hex(SHA256.hash("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Self.hex(SHA256.hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        )
    }

    /// RFC 4231's test cases 1 to 4, 6 and 7 (5 truncates the output, which Hark never does).
    @Test func hmacMatchesRFC4231() {
        let cases: [(key: [UInt8], data: [UInt8], mac: String)] = [
            (
                [UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            (
                Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            (
                [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
            ),
            (
                Self.bytes("0102030405060708090a0b0c0d0e0f10111213141516171819"), [UInt8](repeating: 0xcd, count: 50),
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
            ),
            (
                [UInt8](repeating: 0xaa, count: 131),
                Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
            (
                [UInt8](repeating: 0xaa, count: 131),
                Array(
                    ("This is a test using a larger than block-size key and a larger than block-size data. The key "
                        + "needs to be hashed before being used by the HMAC algorithm.").utf8
                ),
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
            ),
        ]
        for (number, vector) in cases.enumerated() {
            #expect(Self.hex(SHA256.hmac(key: vector.key, message: vector.data)) == vector.mac, "case \(number)")
        }
    }

    /// Keys and messages of every length around the block and padding boundaries (55, 56, 63, 64, 65 bytes...),
    /// each signed here and by Python's `hmac` in one run of the interpreter.
    @Test func hmacAndHashMatchPythonAtEveryBoundary() async throws {
        let lengths = [0, 1, 31, 32, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 200, 1000]
        var lines: [String] = []
        var expected: [String] = []
        for (index, length) in lengths.enumerated() {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
            let key = (0..<lengths[(index + 5) % lengths.count]).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
            lines.append(Self.hex(key) + " " + Self.hex(message))
            expected.append(Self.hex(SHA256.hmac(key: key, message: message)) + " " + Self.hex(SHA256.hash(message)))
        }
        let script = """
            import hashlib, hmac, sys
            for line in sys.argv[1].split(","):
                key, message = (bytes.fromhex(part) for part in line.split(" "))
                print(hmac.new(key, message, hashlib.sha256).hexdigest(), hashlib.sha256(message).hexdigest())
            """
        let child = try await ChildProcess.run("/usr/bin/python3", ["-c", script, lines.joined(separator: ",")])
        #expect(child.status == 0, "\(child.text)")
        let answers = child.text.split(separator: "\n").map(String.init)
        #expect(answers.count == lengths.count, "\(child.text)")
        #expect(answers == expected)
    }
}
