import Glibc
import Testing
@testable import BluectlCore

private func psmFailure(_ text: String) -> String? {
    do throws(BluetoothParseError) {
        _ = try L2CAPPSM.parse(text)
        return nil
    } catch {
        return error.reason
    }
}

@Suite struct L2CAPPSMTests {
    @Test(arguments: [
        ("128", 0x80), ("0x80", 0x80), ("0X80", 0x80), ("0x0080", 0x80), ("1", 1), ("255", 255), ("0xff", 255),
        ("0xFF", 255), ("00129", 129), ("0x25", 0x25),
    ] as [(String, UInt16)])
    func accepted(text: String, value: UInt16) throws {
        let psm = try L2CAPPSM.parse(text)
        #expect(psm.rawValue == value)
    }

    @Test(arguments: [
        ("", "empty"),
        ("0", "0 is not a PSM"),
        ("0x0", "0 is not a PSM"),
        ("256", "LE PSMs go up to 0x00FF (255); larger ones are BR/EDR PSMs, which bluectl does not open"),
        ("0x1001", "LE PSMs go up to 0x00FF (255); larger ones are BR/EDR PSMs, which bluectl does not open"),
        ("0x", "expected a decimal number or 0x followed by hex digits"),
        ("0x00080", "too many hex digits (an LE PSM is at most 0x00FF)"),
        ("999999", "too many digits (an LE PSM is at most 255)"),
        ("-1", "expected a decimal number or 0x followed by hex digits"),
        ("+5", "expected a decimal number or 0x followed by hex digits"),
        (" 5", "expected a decimal number or 0x followed by hex digits"),
        ("0x8g", "not a hex number after 0x"),
        ("0b101", "expected a decimal number or 0x followed by hex digits"),
        ("5\u{0}", "expected a decimal number or 0x followed by hex digits"),
    ])
    func refused(text: String, reason: String) {
        #expect(psmFailure(text) == reason)
    }

    @Test func describedInHexAndWhetherDynamic() throws {
        #expect(try L2CAPPSM.parse("128").description == "0x0080")
        #expect(try L2CAPPSM.parse("0x25").description == "0x0025")
        #expect(try L2CAPPSM.parse("128").isDynamic)
        #expect(try !L2CAPPSM.parse("127").isDynamic)
        #expect(L2CAPPSM(rawValue: 0) == nil)
        #expect(L2CAPPSM(rawValue: 0x100) == nil)
        #expect(BluetoothParseError(.psm, input: "x", reason: "why").description == "invalid PSM \"x\": why")
    }

    @Test("each parser's error names what it parsed, so one catch can tell a bad address from a bad UUID or PSM")
    func parseErrorsNameTheirSubject() {
        #expect(throws: BluetoothParseError(.psm, input: "0", reason: "0 is not a PSM")) { try L2CAPPSM.parse("0") }
        let address = #expect(throws: BluetoothParseError.self) { try BluetoothAddress.parse("0") }
        #expect(address?.subject == .address)
        let uuid = #expect(throws: BluetoothParseError.self) { try BluetoothUUID("0x1") }
        #expect(uuid?.subject == .uuid)
    }
}

@Suite struct L2CAPSocketAddressTests {
    /// The sockaddr_l2 bytes as the kernel reads them: family, PSM (LE), bdaddr (LSB first), CID, type.
    @Test func sockaddrLayout() throws {
        let address = try BluetoothAddress.parse("00:AA:01:03:00:03")
        let sa = L2CAPSocket.address(address, type: .public, psm: 0x0080)
        let bytes = withUnsafeBytes(of: sa) { Array($0) }
        #expect(bytes.count == 14)
        #expect(bytes[0..<2] == [UInt8(AF_BLUETOOTH), 0])
        #expect(bytes[2..<4] == [0x80, 0x00])
        #expect(bytes[4..<10] == [0x03, 0x00, 0x03, 0x01, 0xAA, 0x00])
        #expect(bytes[10..<12] == [0, 0])
        #expect(bytes[12] == 1)
        let random = L2CAPSocket.address(try BluetoothAddress.parse("C0:AA:01:02:00:02"), type: .random, psm: 0x00FF)
        let randomBytes = withUnsafeBytes(of: random) { Array($0) }
        #expect(randomBytes[2..<4] == [0xFF, 0x00])
        #expect(randomBytes[4..<10] == [0x02, 0x00, 0x02, 0x01, 0xAA, 0xC0])
        #expect(randomBytes[12] == 2)
    }

    @Test(arguments: ["00:AA:01:03:00:03", "C0:AA:01:02:00:02", "FF:FF:FF:FF:FF:FE", "01:23:45:67:89:AB"], AddressType.allCases)
    func peerRoundTrip(text: String, type: AddressType) throws {
        let address = try BluetoothAddress.parse(text)
        let back = try #require(L2CAPSocket.peer(of: L2CAPSocket.address(address, type: type, psm: 0x81)))
        #expect(back.0 == address)
        #expect(back.1 == type)
    }

    @Test func securityLevels() {
        #expect(L2CAPSecurity.allCases.map(\.level) == [1, 2, 3])
        #expect([0, 1, 2, 3, 4].map { L2CAPSecurity(level: $0) } == [.none, .none, .encrypted, .authenticated, .authenticated])
        #expect(L2CAPSecurity.none < .encrypted && L2CAPSecurity.encrypted < .authenticated)
    }
}

@Suite struct L2CAPErrnoTests {
    private let what = "open an L2CAP channel to PSM 0x0080 of 00:AA:01:03:00:03"

    @Test func refusedAndSecurity() {
        #expect(L2CAPErrno(ECONNREFUSED).bluetoothError(what)
            == .channelRefused("\(what): refused by the device (nothing listens on that PSM, or it wants more security or has no resources)"))
        #expect(L2CAPErrno(EACCES).bluetoothError(what)
            == .securityFailed("\(what): the link's security could not be raised (pairing failed or was refused)"))
        #expect(L2CAPErrno(EACCES).bluetoothError(what, binding: true)
            == .notPermitted(name: "EACCES", message: "\(what): PSMs below 0x0080 are SIG-assigned; binding one needs CAP_NET_BIND_SERVICE"))
    }

    @Test(arguments: [ECONNRESET, ECONNABORTED, ENOTCONN, EPIPE, ENOLINK, EHOSTDOWN, EHOSTUNREACH, ENETDOWN, ENODEV])
    func linkLost(code: Int32) {
        let text = String(cString: strerror(code))
        #expect(L2CAPErrno(code).bluetoothError(what) == .disconnected("\(what): \(text)"))
    }

    @Test(arguments: [ENOMEM, ENOBUFS, EMFILE, ENFILE, EBUSY])
    func resources(code: Int32) {
        #expect(L2CAPErrno(code).bluetoothError(what) == .noResources("\(what): \(String(cString: strerror(code)))"))
    }

    @Test func bindingAndOthers() {
        #expect(L2CAPErrno(EADDRINUSE).bluetoothError(what, binding: true) == .noResources("\(what): the PSM is in use by another socket"))
        #expect(L2CAPErrno(EINVAL).bluetoothError(what, binding: true)
            == .noResources("\(what): no free dynamic PSM, or the adapter's address is not an LE identity here"))
        #expect(L2CAPErrno(EINVAL).bluetoothError(what) == .unexpected("\(what): \(String(cString: strerror(EINVAL)))"))
        #expect(L2CAPErrno(ETIMEDOUT).bluetoothError(what) == .timeout("\(what): \(String(cString: strerror(ETIMEDOUT)))"))
        #expect(L2CAPErrno(EAGAIN).wouldBlock && !L2CAPErrno(EINTR).wouldBlock)
    }
}
