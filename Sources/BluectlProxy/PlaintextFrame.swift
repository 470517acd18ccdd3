// ESPHome's native API, plaintext framing: each message is
//   0x00 (preamble) | varint payload length | varint message type | payload
// (the varints are protobuf's base-128, least significant group first).
// aioesphomeapi reads the same layout (`_frame_helper/plain_text.py`), with
// at most 4 bytes per varint and 65,535 bytes per payload: the same bounds here.

/// One message of the plaintext framing: its type (api.proto's `(id)`) and
/// its protobuf bytes.
package struct PlaintextFrame: Equatable, Sendable {
    /// The message type (`APIMessage.messageID`).
    package var type: UInt32
    /// The message's protobuf encoding.
    package var payload: [UInt8]

    package init(type: UInt32, payload: [UInt8]) {
        self.type = type
        self.payload = payload
    }

    /// The frame's bytes on the wire.
    package var bytes: [UInt8] {
        var out: [UInt8] = [0x00]
        out.reserveCapacity(payload.count + 7)
        Self.appendVarint(UInt32(payload.count), to: &out)
        Self.appendVarint(type, to: &out)
        out.append(contentsOf: payload)
        return out
    }

    static func appendVarint(_ value: UInt32, to out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }
}

/// Why a client's bytes are not a plaintext frame: the connection ends.
package enum FrameError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The first byte is not 0x00 (0x01 is the Noise framing's).
    case badPreamble(UInt8)
    /// A varint of more than `FrameDecoder.maxVarintBytes` bytes.
    case varintTooLong
    /// A payload length over `FrameDecoder.maxPayload`.
    case tooLong(UInt32)

    package var description: String {
        switch self {
        case .badPreamble(0x01): "preamble 0x01: the client speaks the Noise (encrypted) framing, this server plaintext"
        case .badPreamble(let byte): "bad preamble 0x" + String(byte, radix: 16, uppercase: false).leftPadded(to: 2)
        case .varintTooLong: "a varint longer than \(FrameDecoder.maxVarintBytes) bytes"
        case .tooLong(let length): "frame length \(length) exceeds \(FrameDecoder.maxPayload) bytes"
        }
    }
}

/// Splits a byte stream into plaintext frames: a pure value (no I/O), fed
/// whatever a read returned; fuzzable. A frame is returned only once all of
/// it arrived; an error is final (the stream has no resynchronisation point).
package struct FrameDecoder: Sendable {
    /// The largest payload accepted (aioesphomeapi's `MAX_PLAINTEXT_FRAME_SIZE`).
    package static let maxPayload: UInt32 = 65_535
    /// The longest varint accepted (aioesphomeapi's `_MAX_VARUINT_BYTES`).
    package static let maxVarintBytes = 4

    private var buffer: [UInt8] = []
    /// Where the next frame starts in `buffer` (consumed bytes are dropped in bulk).
    private var start = 0
    private var failed: FrameError?

    package init() {}

    /// Bytes received and not yet part of a returned frame.
    package var pendingCount: Int { buffer.count - start }

    /// Adds received bytes.
    package mutating func append(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame, nil when more bytes are needed; throws at the
    /// first malformed header (and again on every later call).
    package mutating func next() throws(FrameError) -> PlaintextFrame? {
        if let failed { throw failed }
        do {
            return try parse()
        } catch {
            failed = error
            throw error
        }
    }

    private mutating func parse() throws(FrameError) -> PlaintextFrame? {
        var i = start
        guard i < buffer.count else { return nil }
        guard buffer[i] == 0x00 else { throw .badPreamble(buffer[i]) }
        i += 1
        guard let length = try varint(at: &i) else { return nil }
        guard length <= Self.maxPayload else { throw .tooLong(length) }
        guard let type = try varint(at: &i) else { return nil }
        guard buffer.count - i >= Int(length) else { return nil }
        let payload = Array(buffer[i..<(i + Int(length))])
        start = i + Int(length)
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= 4096 {
            buffer.removeFirst(start)
            start = 0
        }
        return PlaintextFrame(type: type, payload: payload)
    }

    /// A varint at `i` (advanced past it), nil when incomplete.
    private func varint(at i: inout Int) throws(FrameError) -> UInt32? {
        var value: UInt32 = 0
        var shift: UInt32 = 0
        for _ in 0..<Self.maxVarintBytes {
            guard i < buffer.count else { return nil }
            let byte = buffer[i]
            i += 1
            value |= UInt32(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw .varintTooLong
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
