/// Checks a stream of values that start with a little-endian sequence
/// number (8, 16 or 32 bits, wrapping): the only way to see a loss that
/// happens before bluectl gets the value — bluetoothd drops AcquireNotify
/// values silently when the socket is full — or a reordering (EATT).
/// Pure: `observe` returns what the value shows, the counters add up.
struct SequenceTracker: Sendable, Equatable {
    enum Width: Int, Sendable, CaseIterable {
        case u8 = 1, u16 = 2, u32 = 4

        init?(name: String) {
            switch name {
            case "u8": self = .u8
            case "u16": self = .u16
            case "u32": self = .u32
            default: return nil
            }
        }

        var modulus: UInt64 { 1 << UInt64(rawValue * 8) }
    }

    enum Finding: Sendable, Equatable {
        /// `missing` numbers were skipped: expected `expected`, got `got`.
        case gap(expected: UInt32, got: UInt32, missing: Int)
        /// A number counted missing arrived after later ones (reordered).
        case late(UInt32)
        /// A number seen already.
        case repeated(UInt32)
        /// Shorter than the sequence number.
        case short(length: Int)
    }

    let width: Width
    /// Values observed.
    private(set) var values = 0
    /// Numbers skipped and not (yet) arrived late.
    private(set) var missing = 0
    private(set) var late = 0
    private(set) var repeated = 0
    private(set) var short = 0
    private var next: UInt64?
    /// Recently skipped numbers, so that a late arrival is told from a repeat.
    private var skipped: Set<UInt64> = []
    private var skippedOrder: [UInt64] = []
    static let skippedMemory = 4096

    init(width: Width) { self.width = width }

    mutating func observe(_ bytes: [UInt8]) -> Finding? {
        values += 1
        guard bytes.count >= width.rawValue else {
            short += 1
            return .short(length: bytes.count)
        }
        var seq: UInt64 = 0
        for i in 0..<width.rawValue { seq |= UInt64(bytes[i]) << UInt64(8 * i) }
        let m = width.modulus
        guard let expected = next else {
            next = (seq + 1) % m
            return nil
        }
        let ahead = (seq + m - expected) % m
        if ahead == 0 {
            next = (seq + 1) % m
            return nil
        }
        if ahead < m / 2 {
            // Skipped `ahead` numbers (remember the most recent ones).
            var n = expected
            for _ in 0..<min(ahead, UInt64(Self.skippedMemory)) {
                remember(n)
                n = (n + 1) % m
            }
            missing += Int(ahead)
            next = (seq + 1) % m
            return .gap(expected: UInt32(expected), got: UInt32(seq), missing: Int(ahead))
        }
        if skipped.remove(seq) != nil {
            missing -= 1
            late += 1
            return .late(UInt32(seq))
        }
        repeated += 1
        return .repeated(UInt32(seq))
    }

    private mutating func remember(_ n: UInt64) {
        if skipped.insert(n).inserted { skippedOrder.append(n) }
        if skippedOrder.count > Self.skippedMemory * 2 {
            let drop = skippedOrder.count - Self.skippedMemory
            for old in skippedOrder[..<drop] { skipped.remove(old) }
            skippedOrder.removeFirst(drop)
        }
    }

    /// "1000 values, 3 missing, 0 late, 0 repeated"
    var summary: String {
        var parts = ["\(values) values", "\(missing) missing", "\(late) late", "\(repeated) repeated"]
        if short > 0 { parts.append("\(short) too short") }
        return parts.joined(separator: ", ")
    }
}
