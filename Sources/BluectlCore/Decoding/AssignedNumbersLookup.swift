/// One row of the generated UUID table (AssignedNumbers.swift).
struct AssignedUUID: Sendable {
    let uuid: UInt128
    let kind: BluetoothUUID.Kind
    /// A Bluetooth SIG assignment (org.bluetooth.*), rather than a vendor's.
    let sig: Bool
    /// The entry shown for its (kind, uuid); other entries for it are aliases, still accepted as names.
    let primary: Bool
    let name: String
    let identifier: String
    let shortName: String
}

/// Lookups over the generated tables (the data is in AssignedNumbers.swift),
/// searched where they lie: nothing is parsed or built before the first
/// lookup (the tables were 23.5 M instructions to parse, before a command's
/// first value), and a lookup builds only the row it returns. A UUID is found
/// by binary search of `uuidKeys`, a company by binary search of
/// `companyCodes`; a name by one pass over the rows' bytes.
enum AssignedNumbers {
    enum Resolution {
        case found(UInt128)
        case ambiguous([AssignedUUID])
        case notFound
    }

    /// Every row, built on demand (for tests: lookups do not use it).
    static var uuids: [AssignedUUID] { (0..<uuidCount).map(row) }

    /// The company identifiers and their names, index for index, built on
    /// demand (for tests: lookups do not use it).
    static var companies: (codes: [UInt16], names: [String]) {
        (companyCodes, (0..<companyCount).map(companyName(at:)))
    }

    /// The row shown for `uuid`, in the first table (service, characteristic, descriptor) that has it.
    static func rowIndex(for uuid: UInt128) -> Int? {
        for kind in BluetoothUUID.Kind.allCases {
            if let index = rowIndex(for: uuid, kind: kind) { return index }
        }
        return nil
    }

    /// The row shown for `uuid` as a `kind` (its primary entry): a binary search of the keys.
    static func rowIndex(for uuid: UInt128, kind: BluetoothUUID.Kind) -> Int? {
        let end = uuidKindStarts[kind.rank + 1]
        var lo = uuidKindStarts[kind.rank], hi = end
        while lo < hi {
            let mid = (lo + hi) / 2
            if uuidKeys[mid] < uuid { lo = mid + 1 } else { hi = mid }
        }
        // the first row of a UUID is its primary entry
        guard lo < end, uuidKeys[lo] == uuid else { return nil }
        return lo
    }

    /// A field of a row.
    enum Field {
        case name, identifier, shortName
    }

    /// One field of row `index`: the only string a name lookup builds (a
    /// UUID's label is asked per line a subscription prints).
    static func field(_ field: Field, ofRow index: Int) -> String {
        withTable { table in
            guard let view = RowView(index, in: table) else { preconditionFailure("malformed row \(index) of uuidTable") }
            let range: Range<Int>
            switch field {
            case .name: range = view.name
            case .identifier: range = view.identifier
            case .shortName: range = view.shortName
            }
            return String(decoding: table[range], as: UTF8.self)
        }
    }

    /// The name of company `code`; nil when unassigned.
    static func companyName(for code: UInt16) -> String? {
        var lo = 0, hi = companyCodes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if companyCodes[mid] < code { lo = mid + 1 } else { hi = mid }
        }
        guard lo < companyCodes.count, companyCodes[lo] == code else { return nil }
        return companyName(at: lo)
    }

    private static func companyName(at index: Int) -> String {
        var names = companyNames
        return names.withUTF8 { text in
            String(decoding: text[Int(companyNameStarts[index])..<Int(companyNameStarts[index + 1]) - 1], as: UTF8.self)
        }
    }

    // MARK: - Rows in place

    /// Row `index` of uuidTable: where its fields lie in the table's bytes.
    private struct RowView {
        let index: Int
        let kind: BluetoothUUID.Kind
        let sig: Bool
        let primary: Bool
        let name: Range<Int>
        let identifier: Range<Int>
        let shortName: Range<Int>

        /// `KIND ORIGIN ROLE UUID|NAME|IDENTIFIER|SHORTNAME` (see AssignedNumbers.swift).
        init?(_ index: Int, in table: UnsafeBufferPointer<UInt8>) {
            let start = Int(uuidRowStarts[index]), end = Int(uuidRowStarts[index + 1]) - 1
            guard end - start > 4, end <= table.count else { return nil }
            switch table[start] {
            case UInt8(ascii: "S"): kind = .service
            case UInt8(ascii: "C"): kind = .characteristic
            case UInt8(ascii: "D"): kind = .descriptor
            default: return nil
            }
            sig = table[start + 2] == UInt8(ascii: "s")
            // ROLE: "primary" or "alias", after ORIGIN ("sig" or "vendor")
            primary = table[start + (sig ? 6 : 9)] == UInt8(ascii: "p")
            // the three "|" that end the head, the name and the identifier
            var bar = (0, 0, 0), found = 0
            for i in start..<end where table[i] == UInt8(ascii: "|") {
                switch found {
                case 0: bar.0 = i
                case 1: bar.1 = i
                default: bar.2 = i
                }
                found += 1
                if found == 3 { break }
            }
            guard found == 3 else { return nil }
            self.index = index
            name = (bar.0 + 1)..<bar.1
            identifier = (bar.1 + 1)..<bar.2
            shortName = (bar.2 + 1)..<end
        }

        func row(in table: UnsafeBufferPointer<UInt8>) -> AssignedUUID {
            func text(_ range: Range<Int>) -> String { String(decoding: table[range], as: UTF8.self) }
            return AssignedUUID(uuid: uuidKeys[index], kind: kind, sig: sig, primary: primary,
                                name: text(name), identifier: text(identifier), shortName: text(shortName))
        }
    }

    /// `body` with the bytes of uuidTable (a literal: read where it lies, not copied).
    private static func withTable<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        var table = uuidTable
        return table.withUTF8(body)
    }

    /// Row `index` as an entry. The generator writes well-formed rows; a test reads them all.
    static func row(_ index: Int) -> AssignedUUID {
        withTable { table in
            guard let view = RowView(index, in: table) else { preconditionFailure("malformed row \(index) of uuidTable") }
            return view.row(in: table)
        }
    }

    // MARK: - Names

    private static func asciiLower(_ b: UInt8) -> UInt8 { (0x41...0x5A).contains(b) ? b | 0x20 : b }

    /// The bytes at `range`, ASCII-lowercased, equal `key`.
    private static func equalsLowered(_ table: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ key: [UInt8]) -> Bool {
        guard range.count == key.count else { return false }
        for (i, k) in zip(range, key) where asciiLower(table[i]) != k { return false }
        return true
    }

    /// The identifier at `range` ends with "." + `key` (ASCII-lowercased).
    private static func isTail(_ table: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ key: [UInt8]) -> Bool {
        let start = range.upperBound - key.count
        guard start > range.lowerBound, table[start - 1] == UInt8(ascii: ".") else { return false }
        return equalsLowered(table, start..<range.upperBound, key)
    }

    /// The bytes at `range`, ASCII-lowercased, contain `needle`.
    private static func contains(_ table: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ needle: [UInt8]) -> Bool {
        let n = needle.count
        guard n > 0 else { return true }
        guard range.count >= n else { return false }
        outer: for i in range.lowerBound...(range.upperBound - n) {
            for j in 0..<n where asciiLower(table[i + j]) != needle[j] { continue outer }
            return true
        }
        return false
    }

    /// The tier (see `BluetoothUUID.init(_:kind:)`) at which `key` names this row, if any.
    private static func tier(of key: [UInt8], parts: Int, _ e: RowView, in table: UnsafeBufferPointer<UInt8>) -> Int? {
        if equalsLowered(table, e.identifier, key) { return 1 }
        var best: Int? = nil
        if equalsLowered(table, e.name, key) { best = e.sig ? 2 : 4 }
        if isTail(table, e.identifier, key) {
            // Components in the local name: the identifier after its first three
            // (org.bluetooth.characteristic.), or 1 for identifiers that short.
            let dots = e.identifier.count(where: { table[$0] == UInt8(ascii: ".") })
            let localParts = dots >= 3 ? dots - 2 : 1
            let t: Int? = parts >= localParts ? (e.sig ? 2 : 4) : (e.sig ? 3 : nil)
            if let t, t < best ?? .max { best = t }
        }
        return best
    }

    /// The rows of `kind` (all when nil).
    private static func rows(of kind: BluetoothUUID.Kind?) -> Range<Int> {
        guard let kind else { return 0..<uuidCount }
        return uuidKindStarts[kind.rank]..<uuidKindStarts[kind.rank + 1]
    }

    /// The entries of the deciding tier, one per (kind, uuid).
    static func matches(_ key: [UInt8], kind: BluetoothUUID.Kind?) -> [AssignedUUID] {
        let parts = key.count(where: { $0 == UInt8(ascii: ".") }) + 1
        return withTable { table in
            var bestTier = Int.max
            var found: [RowView] = []
            for index in rows(of: kind) {
                guard let e = RowView(index, in: table), let t = tier(of: key, parts: parts, e, in: table), t <= bestTier
                else { continue }
                if t < bestTier {
                    bestTier = t
                    found.removeAll()
                }
                if !found.contains(where: { $0.kind == e.kind && uuidKeys[$0.index] == uuidKeys[e.index] }) { found.append(e) }
            }
            return found.map { $0.row(in: table) }
        }
    }

    static func resolve(_ key: [UInt8], kind: BluetoothUUID.Kind?) -> Resolution {
        let found = matches(key, kind: kind)
        guard let first = found.first else { return .notFound }
        return found.allSatisfy({ $0.uuid == first.uuid }) ? .found(first.uuid) : .ambiguous(found)
    }

    /// Up to four short names of entries whose identifier or name contains `key`,
    /// SIG ones and shorter ones first.
    static func suggestions(for key: [UInt8], kind: BluetoothUUID.Kind?) -> [String] {
        guard key.count >= 3, key.count <= 64 else { return [] }
        var hits: [(sig: Bool, name: String)] = withTable { table in
            var hits: [(sig: Bool, name: String)] = []
            for index in rows(of: kind) {
                guard let e = RowView(index, in: table), e.primary,
                      contains(table, e.identifier, key) || contains(table, e.name, key) else { continue }
                let shortName = String(decoding: table[e.shortName], as: UTF8.self)
                if !hits.contains(where: { $0.name == shortName }) { hits.append((e.sig, shortName)) }
            }
            return hits
        }
        hits.sort { a, b in
            if a.sig != b.sig { return a.sig }
            if a.name.utf8.count != b.name.utf8.count { return a.name.utf8.count < b.name.utf8.count }
            return a.name < b.name
        }
        return hits.prefix(4).map(\.name)
    }
}
