// Fuzz target: the parsers of what users type and what BlueZ names —
// UUIDs, hex values, Bluetooth addresses, object paths, signatures.
//
// The first byte picks the parser; the rest is the text (as UTF-8, ill-formed
// sequences repaired, as a command line would be). Properties: whatever
// parses formats back to text that parses to the same value; rejections say
// why on one line with no control characters; the Swift object-path and
// signature validators agree with libdbus's (which aborts on what it rejects).
import CBluectlShim
import FuzzSupport
@testable import BluectlCore
@testable import BluectlDBus

enum Parser: UInt8, CaseIterable {
    case uuid, hex, address, pathElement, objectPath, signature, rawBytes
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    let rest = input.rest()
    let text = String(decoding: rest, as: UTF8.self)
    switch Parser(rawValue: selector % UInt8(Parser.allCases.count))! {
    case .uuid:
        let kinds: [BluetoothUUID.Kind?] = [nil, .service, .characteristic, .descriptor]
        uuid(text, kind: kinds[Int(selector >> 3) % kinds.count])
    case .hex: hex(text)
    case .address: address(text)
    case .pathElement: pathElement(text)
    case .objectPath: objectPath(text)
    case .signature: signature(text)
    case .rawBytes: rawBytes(rest)
    }
    return 0
}

/// One line, nothing a terminal would act on.
func isOneSafeLine(_ s: String) -> Bool {
    !s.isEmpty && !s.unicodeScalars.contains { $0.properties.generalCategory == .control }
}

func uuid(_ text: String, kind: BluetoothUUID.Kind?) {
    let u: BluetoothUUID
    do {
        u = try BluetoothUUID(text, kind: kind)
    } catch {
        check(isOneSafeLine(error.description), "UUID error is not one safe line: \(error.description.debugDescription)")
        return
    }
    for form in [u.uuidString, u.uuidString.uppercased(), u.shortString, " \(u.uuidString)\n"] {
        check((try? BluetoothUUID(form)) == u, "\(text.debugDescription) parsed to \(u), but \(form.debugDescription) does not")
    }
    check(BluetoothUUID(bytes: u.bytes) == u, "bytes round trip of \(u)")
    check(u.uuidString.utf8.count == 36, "uuidString \(u.uuidString)")
    if let short = u.uint16Value {
        check(u.shortString.utf8.count == 4 && BluetoothUUID(uint16: short) == u, "16-bit form of \(u)")
    } else if let short = u.uint32Value {
        check(u.shortString.utf8.count == 8 && BluetoothUUID(uint32: short) == u, "32-bit form of \(u)")
    } else {
        check(u.shortString == u.uuidString, "shortString of a 128-bit UUID \(u)")
    }
    _ = (u.name, u.shortName, u.identifier, u.kinds)
}

func hex(_ text: String) {
    let bytes: [UInt8]
    do {
        bytes = try ByteFormats.parseHex(text)
    } catch {
        check(isOneSafeLine(error.description), "hex error is not one safe line: \(error.description.debugDescription)")
        return
    }
    check(!bytes.isEmpty, "\(text.debugDescription) parsed to no bytes")
    let digits = text.unicodeScalars.count { $0.properties.isASCIIHexDigit }
    check(bytes.count * 2 <= digits, "\(text.debugDescription): \(bytes.count) bytes from \(digits) digits")
    let forms = [
        ByteFormats.hex(bytes), ByteFormats.hexSpaced(bytes), "0x" + ByteFormats.hex(bytes),
        bytes.map { "0x" + ByteFormats.hex([$0]) }.joined(separator: ", "),
        ByteFormats.hex(bytes).uppercased(),
    ]
    for form in forms {
        check((try? ByteFormats.parseHex(form)) == bytes, "\(text.debugDescription) gave \(bytes), but \(form.debugDescription) does not")
    }
    check(ByteFormats.hexDump(bytes).hasPrefix(ByteFormats.hexSpaced(bytes)), "hexDump of \(bytes)")
}

func address(_ text: String) {
    let a: BluetoothAddress
    do {
        a = try BluetoothAddress.parse(text)
    } catch {
        check(isOneSafeLine(error.description), "address error is not one safe line: \(error.description.debugDescription)")
        check(BluetoothAddress(text) == nil, "init? and parse disagree on \(text.debugDescription)")
        return
    }
    // Exactly the accepted forms: the trimmed text is the address, in any case, ":" or "-".
    let trimmed = text.trimmingASCIIWhitespace
    let normalized = trimmed.uppercased().replacingOccurrences(of: "-", with: ":")
    check(normalized == a.description, "\(text.debugDescription) parsed to \(a)")
    check(a.description.utf8.count == 17, "description \(a)")
    for form in [a.description, a.description.lowercased(), a.description.replacingOccurrences(of: ":", with: "-")] {
        check((try? BluetoothAddress.parse(form)) == a, "\(form.debugDescription) does not parse back to \(a)")
    }
    check(BluetoothAddress(pathElement: a.pathElement) == a, "path element round trip of \(a)")
    check(BluetoothAddress(bytes: a.bytes) == a && BluetoothAddress(uint64: a.uint64Value) == a, "bytes round trip of \(a)")
}

func pathElement(_ text: String) {
    guard let a = BluetoothAddress(pathElement: text) else { return }
    check(a.pathElement == "dev_" + text.dropFirst(4).uppercased(), "\(text.debugDescription) parsed to \(a.pathElement)")
    check(ObjectPath("/org/bluez/hci0")?.appending(a.pathElement) != nil, "\(a.pathElement) is not a path element")
}

func objectPath(_ text: String) {
    let ours = ObjectPath(text) != nil
    // A C string ends at the first NUL; the Swift validator sees all of it.
    guard !text.utf8.contains(0) else {
        check(!ours, "an object path with a NUL byte was accepted")
        return
    }
    let libdbus = bluectl_valid_path(text)
    check(ours == libdbus, "object path \(text.debugDescription): bluectl says \(ours), libdbus says \(libdbus)")
    if let path = ObjectPath(text) {
        _ = path.parent
        check(path.appending(path.lastComponent.isEmpty ? "x" : path.lastComponent) != nil, "appending to \(text)")
    }
}

func signature(_ text: String) {
    let ours = DBusSignature(text) != nil
    guard !text.utf8.contains(0) else {
        check(!ours, "a signature with a NUL byte was accepted")
        return
    }
    let libdbus = bluectl_valid_signature(text)
    // bluectl may be stricter than libdbus (the specification counts nesting
    // through structs; libdbus resets its array depth), never looser: libdbus
    // aborts on a signature it rejects.
    check(!ours || libdbus, "signature \(text.debugDescription): bluectl accepts, libdbus rejects")
    if let types = SignatureParser.completeTypes(text) {
        check(types.joined() == text, "complete types of \(text.debugDescription): \(types)")
        for type in types { check(DBusSignature(type)?.isSingleCompleteType == true, "\(type) of \(text)") }
    }
}

func rawBytes(_ bytes: [UInt8]) {
    if let u = BluetoothUUID(bytes: bytes) {
        check([2, 4, 16].contains(bytes.count), "UUID from \(bytes.count) bytes")
        if bytes.count == 16 { check(u.bytes == bytes, "UUID bytes \(bytes)") }
        check((try? BluetoothUUID(u.uuidString)) == u, "UUID \(u) from bytes does not parse back")
    } else {
        check(![2, 4, 16].contains(bytes.count), "no UUID from \(bytes.count) bytes")
    }
    if let a = BluetoothAddress(bytes: bytes) {
        check(bytes.count == 6 && a.bytes == bytes, "address from \(bytes)")
    } else {
        check(bytes.count != 6, "no address from 6 bytes")
    }
    let hex = ByteFormats.hex(bytes)
    check(hex.utf8.count == 2 * bytes.count, "hex of \(bytes.count) bytes")
    if !bytes.isEmpty { check((try? ByteFormats.parseHex(hex)) == bytes, "hex round trip of \(bytes)") }
    _ = ByteFormats.utf8Text(bytes)
    let quoted = BluetoothParseError.quote(String(decoding: bytes, as: UTF8.self))
    check(isOneSafeLine(quoted), "quote is not one safe line: \(quoted.debugDescription)")
}

extension String {
    /// Without the spaces, tabs and line breaks the parsers ignore around a value.
    var trimmingASCIIWhitespace: String {
        let bytes = Array(utf8)
        var lo = 0, hi = bytes.count
        let ws: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        while lo < hi, ws.contains(bytes[lo]) { lo += 1 }
        while hi > lo, ws.contains(bytes[hi - 1]) { hi -= 1 }
        return String(decoding: bytes[lo..<hi], as: UTF8.self)
    }

    func replacingOccurrences(of a: String, with b: String) -> String {
        split(separator: a, omittingEmptySubsequences: false).joined(separator: b)
    }
}
