import Testing
@testable import BluectlCore

@Suite("AES-CCM (libcrypto)")
struct AESCCMTests {
    static func bytes(_ hex: String) -> [UInt8] { try! ByteFormats.parseHex(hex) }

    // RFC 3610, section 8, packet vector #1: 13-byte nonce, 8 bytes of associated data, 8-byte tag.
    static let key = bytes("C0C1C2C3C4C5C6C7C8C9CACBCCCDCECF")
    static let nonce = bytes("00000003020100A0A1A2A3A4A5")
    static let aad = bytes("0001020304050607")
    static let plaintext = bytes("08090A0B0C0D0E0F101112131415161718191A1B1C1D1E")
    static let ciphertext = bytes("588C979A61C663D2F066D0C2C0F989806D5F6B61DAC384")
    static let tag = bytes("17E8D12CFDF926E0")

    @Test("RFC 3610 packet vector #1 seals to its published ciphertext and tag")
    func sealsKnownAnswer() throws {
        let sealed = try #require(AESCCM.seal(plaintext: Self.plaintext, key: Self.key, nonce: Self.nonce, tagLength: 8,
                                              associatedData: Self.aad))
        #expect(sealed.ciphertext == Self.ciphertext)
        #expect(sealed.tag == Self.tag)
    }

    @Test("RFC 3610 packet vector #1 opens; a changed byte, tag, key or nonce does not")
    func opensKnownAnswer() {
        #expect(AESCCM.open(ciphertext: Self.ciphertext, tag: Self.tag, key: Self.key, nonce: Self.nonce,
                            associatedData: Self.aad) == Self.plaintext)
        var altered = Self.ciphertext
        altered[3] ^= 0x01
        #expect(AESCCM.open(ciphertext: altered, tag: Self.tag, key: Self.key, nonce: Self.nonce, associatedData: Self.aad) == nil)
        var badTag = Self.tag
        badTag[0] ^= 0x80
        #expect(AESCCM.open(ciphertext: Self.ciphertext, tag: badTag, key: Self.key, nonce: Self.nonce, associatedData: Self.aad) == nil)
        var badKey = Self.key
        badKey[15] ^= 0x01
        #expect(AESCCM.open(ciphertext: Self.ciphertext, tag: Self.tag, key: badKey, nonce: Self.nonce, associatedData: Self.aad) == nil)
        #expect(AESCCM.open(ciphertext: Self.ciphertext, tag: Self.tag, key: Self.key, nonce: Array(Self.nonce.dropLast()) + [0],
                            associatedData: Self.aad) == nil)
        #expect(AESCCM.open(ciphertext: Self.ciphertext, tag: Self.tag, key: Self.key, nonce: Self.nonce) == nil)
    }

    @Test("A 12-byte nonce and a 4-byte tag (MiBeacon's shape) round-trip")
    func roundTripsShortNonce() throws {
        let nonce = Array(Self.nonce.prefix(12))
        let sealed = try #require(AESCCM.seal(plaintext: [1, 2, 3], key: Self.key, nonce: nonce, tagLength: 4, associatedData: [0x11]))
        #expect(sealed.tag.count == 4)
        #expect(AESCCM.open(ciphertext: sealed.ciphertext, tag: sealed.tag, key: Self.key, nonce: nonce, associatedData: [0x11]) == [1, 2, 3])
    }

    @Test("Arguments outside what CCM allows give nil, not a trap")
    func refusesBadArguments() {
        #expect(AESCCM.open(ciphertext: [1], tag: [1, 2, 3, 4], key: [1, 2], nonce: Self.nonce) == nil)
        #expect(AESCCM.open(ciphertext: [1], tag: [1, 2, 3], key: Self.key, nonce: Self.nonce) == nil)
        #expect(AESCCM.open(ciphertext: [1], tag: [1, 2, 3, 4], key: Self.key, nonce: [1, 2, 3]) == nil)
        #expect(AESCCM.seal(plaintext: [1], key: Self.key, nonce: Array(repeating: 0, count: 14), tagLength: 4) == nil)
        #expect(AESCCM.seal(plaintext: [1], key: Self.key, nonce: Self.nonce, tagLength: 18) == nil)
    }
}
