import ArgumentParser
import BluectlCore
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `bluectl read DEVICE CHARACTERISTIC`
struct ReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Read a characteristic (or one of its descriptors) and print the value.",
        discussion: """
            CHARACTERISTIC: a 16/32/128-bit UUID or a SIG name (2a19, battery_level, \
            00002a19-0000-1000-8000-00805f9b34fb); when a UUID is not unique on the device, \
            name one by D-Bus path or handle:N. Connects when needed and disconnects afterwards \
            only if bluectl made the connection. An encrypted characteristic pairs (just works) \
            through bluectl's agent.

            DEVICE may be a comma-separated list: the devices are read at once (their connects one \
            at a time, as the adapter needs), one line each, naming the device; a device that fails \
            is reported on its own and the others are still read.

            Examples:
              bluectl read AA:BB:CC:DD:EE:FF battery_level
              bluectl read AA:BB:CC:DD:EE:01,AA:BB:CC:DD:EE:02 2a38 --json
              bluectl read AA:BB:CC:DD:EE:FF device_name --format utf8
            """)

    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var options: DeviceCommandOptions

    @Argument(help: "Address, D-Bus path, or name; or several, comma-separated.", completion: deviceCompletion)
    var device: String

    @Argument(help: "UUID, SIG name, D-Bus path or handle:N.")
    var characteristic: String

    @Option(name: .customLong("service"), help: ArgumentHelp("Only within this service.", valueName: "UUID"))
    var serviceText: String?

    @Option(name: .customLong("descriptor"), help: ArgumentHelp("Read this descriptor of the characteristic instead.", valueName: "UUID"))
    var descriptorText: String?

    /// Unconditional: "--offset -1" is rejected by name, not as a missing value.
    @Option(parsing: .unconditional, help: ArgumentHelp("Start reading at this byte offset.", valueName: "N"))
    var offset: Int = 0

    @Option(help: ArgumentHelp("hex (hex + ASCII), utf8, raw, json or decoded (default: hex + ASCII on a terminal, plain hex otherwise).", valueName: "FORMAT"))
    var format: ValueFormat?

    @Flag(help: "One JSON object: device, characteristic, value (hex), decoded when known.")
    var json = false

    func validate() throws {
        _ = try parseSelector(characteristic, kind: .characteristic, what: "CHARACTERISTIC")
        if let serviceText { _ = try parseServiceUUID(serviceText, option: "--service") }
        if let descriptorText { _ = try parseSelector(descriptorText, kind: .descriptor, what: "--descriptor") }
        if !(0...0xFFFF).contains(offset) { throw ValidationError("invalid --offset \"\(offset)\": expected 0 to 65535") }
    }

    func run() async throws {
        let selector = try parseSelector(characteristic, kind: .characteristic, what: "CHARACTERISTIC")
        let service = try serviceText.map { try parseServiceUUID($0, option: "--service") }
        let descriptorSelector = try descriptorText.map { try parseSelector($0, kind: .descriptor, what: "--descriptor") }
        let (devices, options, offset, characteristic) = (try deviceList(device), self.options, self.offset, self.characteristic)
        let format = chosenFormat(self.format, json: json)
        if devices.count > 1, format == .raw { throw rawTakesOneDevice }
        let several = devices.count > 1
        try await runDevicesCommand(adapterOptions: adapterOptions, options: options, what: "read \(characteristic) of \(device)",
                                    devices: devices) { sessions, deadline in
          try await forEachDevice(devices, sessions: sessions, json: format == .json, what: "read \(characteristic)") { device, session in
            let peripheral = try await session.find(device, deadline: deadline)
            session.registerAgent(for: peripheral)
            try await session.connect(peripheral, options: options, deadline: deadline, onQueued: await session.sayQueued)
            let chr = try peripheral.characteristic(selector, service: service)
            let value: [UInt8]
            var descriptor: GattDescriptor?
            if let descriptorSelector {
                let d = try peripheral.descriptor(descriptorSelector, of: chr)
                descriptor = d
                value = try await peripheral.readValue(for: d, offset: offset)
            } else {
                value = try await peripheral.readValue(for: chr, offset: offset)
            }
            if format == .raw {
                _ = ValueText.writeRaw(value)
            } else {
                let record = ValueRecord(device: peripheral.identifier.description, characteristic: chr.uuid,
                                         descriptor: descriptor?.uuid, bytes: value, format: format, namesDevice: several)
                _ = record.line(json: format == .json).map(Output.line)
            }
          }
        }
    }
}

/// `bluectl write DEVICE CHARACTERISTIC VALUE`
struct WriteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Write a value to a characteristic (or one of its descriptors).",
        discussion: """
            VALUE in hex: 0x0102, 0102, "01 02" or 01:02; or --utf8 TEXT; or --file PATH (- for stdin). \
            Without --with-response/--without-response the characteristic's flags choose (with \
            response when allowed). A value longer than the write limit is refused with the limit \
            in the message.

            DEVICE may be a comma-separated list: the same value is written to each (as `read` does).

            --stream writes --file (- for stdin) as it is read, as a stream of writes without \
            response, each carrying up to the link's MTU less 3 bytes (at most 510): through bluetoothd's \
            AcquireWrite socket (no D-Bus message per value), or, where bluetoothd refuses it, \
            WriteValue calls with type command. One device; --timeout bounds the set-up, not \
            the stream. Bluetooth does not confirm these writes: the count reported is what \
            bluetoothd took.

            Examples:
              bluectl write AA:BB:CC:DD:EE:FF 2a39 01 --with-response
              bluectl write Sensor 12345678-1234-5678-1234-56789abcdef1 --utf8 Hello
              cat log.bin | bluectl write Sensor 2a39 --file - --stream
            """)

    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var options: DeviceCommandOptions

    @Argument(help: "Address, D-Bus path, or name.", completion: deviceCompletion)
    var device: String

    @Argument(help: "UUID, SIG name, D-Bus path or handle:N.")
    var characteristic: String

    @Argument(help: "The value in hex (omit with --utf8 or --file).")
    var value: String?

    @Flag(name: .customLong("with-response"), help: "ATT Write Request (BlueZ type request).")
    var withResponse = false

    @Flag(name: .customLong("without-response"), help: "ATT Write Command (BlueZ type command).")
    var withoutResponse = false

    @Option(help: ArgumentHelp("Write this text as UTF-8.", valueName: "TEXT"))
    var utf8: String?

    @Option(help: ArgumentHelp("Write the bytes of this file (- for stdin).", valueName: "PATH"))
    var file: String?

    @Flag(help: "Write --file as a stream of writes without response, as it is read (AcquireWrite).")
    var stream = false

    @Option(name: .customLong("service"), help: ArgumentHelp("Only within this service.", valueName: "UUID"))
    var serviceText: String?

    @Option(name: .customLong("descriptor"), help: ArgumentHelp("Write this descriptor of the characteristic instead.", valueName: "UUID"))
    var descriptorText: String?

    @Flag(help: "One JSON object describing the write.")
    var json = false

    func validate() throws {
        _ = try parseSelector(characteristic, kind: .characteristic, what: "CHARACTERISTIC")
        if let serviceText { _ = try parseServiceUUID(serviceText, option: "--service") }
        if let descriptorText { _ = try parseSelector(descriptorText, kind: .descriptor, what: "--descriptor") }
        if withResponse && withoutResponse { throw ValidationError("--with-response and --without-response exclude each other") }
        let sources = [value != nil, utf8 != nil, file != nil].filter { $0 }.count
        if sources != 1 { throw ValidationError("give exactly one value: VALUE (hex), --utf8 TEXT or --file PATH") }
        if let value {
            do { _ = try ByteFormats.parseHex(value) } catch { throw ValidationError("invalid VALUE: \(error)") }
        }
        if stream {
            if file == nil { throw ValidationError("--stream writes --file PATH (- for stdin)") }
            if withResponse { throw ValidationError("--stream writes without response; --with-response excludes it") }
            if descriptorText != nil { throw ValidationError("--stream writes a characteristic, not --descriptor") }
        }
    }

    func bytes() throws -> [UInt8] {
        if let value { return try ByteFormats.parseHex(value) }
        if let utf8 { return Array(utf8.utf8) }
        guard let file else { return [] }
        switch file == "-" ? Self.readAll(0) : Self.readFile(file) {
        case .success(let bytes): return bytes
        case .failure(let reason):
            throw CLIFailure(.usage, "cannot read --file \"\(TextSafety.escapedForMessage(file))\": \(reason.text)")
        }
    }

    struct FileError: Error { var text: String }

    /// The whole file, or why not (strerror: "No such file or directory", "Is a directory"…).
    static func readFile(_ path: String) -> Result<[UInt8], FileError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(FileError(text: String(cString: strerror(errno)))) }
        defer { close(fd) }
        return readAll(fd)
    }

    /// Everything `fd` has until end of file, or why not.
    static func readAll(_ fd: Int32) -> Result<[UInt8], FileError> {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(FileError(text: String(cString: strerror(errno))))
            }
            if n == 0 { return .success(out) }
            out += buffer[0..<n]
        }
    }

    func run() async throws {
        if stream { return try await runStream() }
        let selector = try parseSelector(characteristic, kind: .characteristic, what: "CHARACTERISTIC")
        let service = try serviceText.map { try parseServiceUUID($0, option: "--service") }
        let descriptorSelector = try descriptorText.map { try parseSelector($0, kind: .descriptor, what: "--descriptor") }
        let bytes = try bytes()
        let (devices, options, json, characteristic) = (try deviceList(device), self.options, self.json, self.characteristic)
        let asked: WriteType? = withResponse ? .withResponse : (withoutResponse ? .withoutResponse : nil)
        try await runDevicesCommand(adapterOptions: adapterOptions, options: options, what: "write \(characteristic) of \(device)",
                                    devices: devices) { sessions, deadline in
          try await forEachDevice(devices, sessions: sessions, json: json, what: "write \(characteristic)") { device, session in
            let peripheral = try await session.find(device, deadline: deadline)
            session.registerAgent(for: peripheral)
            try await session.connect(peripheral, options: options, deadline: deadline, onQueued: await session.sayQueued)
            let chr = try peripheral.characteristic(selector, service: service)
            var record = WriteRecord(device: peripheral.identifier.description, characteristic: chr.uuid, bytes: bytes)
            if let descriptorSelector {
                let d = try peripheral.descriptor(descriptorSelector, of: chr)
                try await peripheral.writeValue(bytes, for: d)
                record.descriptor = d.uuid
            } else {
                let type = asked ?? WriteType.preferred(for: chr)
                if !chr.supports(type), chr.properties.canWriteWithResponse || chr.properties.canWriteWithoutResponse {
                    session.say("note: \(chr.uuid.label) does not list write-\(type.name) (flags: \(chr.flags.joined(separator: ","))); trying anyway")
                }
                try await peripheral.writeValue(bytes, for: chr, type: type)
                record.type = type
            }
            _ = record.line(json: json).map(Output.line)
          }
        }
    }
}

extension WriteType {
    /// "with-response" or "without-response": the option's name, write's JSON `type`.
    var name: String { self == .withResponse ? "with-response" : "without-response" }
}
