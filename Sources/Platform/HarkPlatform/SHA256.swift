import Glibc

/// SHA-256 (FIPS 180-4), and HMAC-SHA256 over it (RFC 2104): the checksums of the native libraries and the LiveKit
/// helper's development tokens. Small and without Foundation, which the layers under the appliance do not link, and
/// without a cryptography package (two copies of BoringSSL to build for one hash).
public enum SHA256 {
    /// The digest's size in bytes.
    public static let digestSize = 32
    /// The size of the blocks the compression function takes, in bytes (HMAC pads its key to it).
    public static let blockSize = 64

    /// The digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var message = Array(bytes)
        let total = UInt64(message.count)
        let whole = message.count / blockSize * blockSize
        var state = initial
        message.withUnsafeBytes { raw in
            if let base = raw.baseAddress { compress(&state, base, blocks: whole / blockSize) }
        }
        message.removeFirst(whole)
        finish(&state, tail: message, total: total)
        return state.flatMap { word in
            stride(from: 24, through: 0, by: -8).map { UInt8(truncatingIfNeeded: word >> $0) }
        }
    }

    /// HMAC-SHA256 of `message` under `key` (RFC 2104; a key longer than a block is hashed first).
    public static func hmac(key: some Sequence<UInt8>, message: some Sequence<UInt8>) -> [UInt8] {
        var block = Array(key)
        if block.count > blockSize { block = hash(block) }
        block += [UInt8](repeating: 0, count: blockSize - block.count)
        let inner = hash(block.map { $0 ^ 0x36 } + Array(message))
        return hash(block.map { $0 ^ 0x5c } + inner)
    }

    /// Pads the last, partial block `tail` (a one bit, zeros, and the length in bits of all `total` bytes) and runs
    /// the compression function over it.
    private static func finish(_ state: inout [UInt32], tail partial: [UInt8], total: UInt64) {
        var tail = partial + [0x80]
        while tail.count % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) {
            tail.append(UInt8(truncatingIfNeeded: (total * 8) >> UInt64(shift)))
        }
        tail.withUnsafeBytes { compress(&state, $0.baseAddress!, blocks: tail.count / 64) }
    }

    /// The round constants.
    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// The state after no input.
    private static let initial: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]

    /// The digest of the file open as `fd`, read from its start, as lowercase hex; nil when it cannot be read.
    static func digest(fd: Int32) -> String? {
        var state = initial
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var total: UInt64 = 0
        var filled = 0
        var offset: off_t = 0
        while true {
            let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + filled, $0.count - filled, offset) }
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else { return nil }
            offset += off_t(got)
            total += UInt64(got)
            filled += got
            let whole = filled / 64 * 64
            buffer.withUnsafeBytes { compress(&state, $0.baseAddress!, blocks: whole / 64) }
            if whole < filled {
                buffer.withUnsafeMutableBytes {
                    $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[whole..<filled]))
                }
            }
            filled -= whole
            if got == 0 { break }
        }
        finish(&state, tail: Array(buffer[0..<filled]), total: total)
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        for word in state {
            for shift in stride(from: 28, through: 0, by: -4) { hex.append(digits[Int((word >> UInt32(shift)) & 0xF)]) }
        }
        return String(decoding: hex, as: UTF8.self)
    }

    /// Runs the compression function over `blocks` 64-byte blocks at `data`.
    private static func compress(_ state: inout [UInt32], _ data: UnsafeRawPointer, blocks: Int) {
        guard blocks > 0 else { return }
        k.withUnsafeBufferPointer { k in
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                var h0 = state[0], h1 = state[1], h2 = state[2], h3 = state[3]
                var h4 = state[4], h5 = state[5], h6 = state[6], h7 = state[7]
                for block in 0..<blocks {
                    let base = data + block * 64
                    for i in 0..<16 {
                        w[i] = UInt32(bigEndian: base.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))
                    }
                    for i in 16..<64 {
                        let x = w[i - 15], y = w[i - 2]
                        let s0 = (x >> 7 | x << 25) ^ (x >> 18 | x << 14) ^ (x >> 3)
                        let s1 = (y >> 17 | y << 15) ^ (y >> 19 | y << 13) ^ (y >> 10)
                        w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
                    }
                    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                    for i in 0..<64 {
                        let s1 = (e >> 6 | e << 26) ^ (e >> 11 | e << 21) ^ (e >> 25 | e << 7)
                        let choice = (e & f) ^ (~e & g)
                        let t1 = h &+ s1 &+ choice &+ k[i] &+ w[i]
                        let s0 = (a >> 2 | a << 30) ^ (a >> 13 | a << 19) ^ (a >> 22 | a << 10)
                        let majority = (a & b) ^ (a & c) ^ (b & c)
                        let t2 = s0 &+ majority
                        h = g
                        g = f
                        f = e
                        e = d &+ t1
                        d = c
                        c = b
                        b = a
                        a = t1 &+ t2
                    }
                    h0 = h0 &+ a
                    h1 = h1 &+ b
                    h2 = h2 &+ c
                    h3 = h3 &+ d
                    h4 = h4 &+ e
                    h5 = h5 &+ f
                    h6 = h6 &+ g
                    h7 = h7 &+ h
                }
                state = [h0, h1, h2, h3, h4, h5, h6, h7]
            }
        }
    }
}
