// Fuzz target: every sensor decoder of SensorDecoders.all, on what a remote device controls —
// its service and manufacturer data and its name — with and without keys.
//
// First byte even — advertisement mode: a name (length-prefixed), a key for the device
// (when the next byte is odd: 16 bytes; the right one for the BTHome seal below, or
// arbitrary), then entries: a kind byte (even: service data of a sensor format's UUID or,
// from 0xF0, any 16-bit UUID; odd: manufacturer data of a sensor maker or any company) and
// length-prefixed bytes. The advertisement goes through SensorDecoders.decode and twice
// through one SensorDecoder.
// First byte odd — sealed BTHome mode: a 4-byte counter and the rest as BTHome objects,
// encrypted as bthome.io/encryption says with a fixed key, so the encrypted path's objects
// are reached; decoded with the key.
//
// Properties: decoding is deterministic; through a SensorDecoder an advertisement seen twice
// decodes alike (an equal counter is accepted); a reading's keyed measurements match its
// measurements one for one and its summary is built; a failure has a one-line detail; a
// sealed frame authenticates; a BTHome reading whose values BTHomeEncoder accepts decodes
// from the encoder's frame to the same values.
import FuzzSupport
@testable import BluectlCore

let address = BluetoothAddress("54:48:E6:8F:80:A5")!
let key: [UInt8] = [0x23, 0x1d, 0x39, 0xc1, 0xd7, 0xcc, 0x1a, 0xb1, 0xae, 0xe2, 0x24, 0xcd, 0x09, 0x6d, 0xb9, 0x32]

/// The service UUIDs and companies the formats live in (and a few near them).
let serviceUUIDs: [UInt16] = [0xFCD2, 0x181A, 0xFE95, 0xFD3D, 0x000D, 0x181C, 0x181E, 0xFEAA, 0x2A6E]
let companies: [UInt16] = [0x0499, 0x0969, 0xEC88, 0x0001, 0x004C, 0x8801, 0x0059]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    if input.byte() & 1 == 0 {
        advertisement(&input)
    } else {
        sealed(&input)
    }
    return 0
}

func advertisement(_ input: inout FuzzInput) {
    let nameBytes = input.lengthPrefixed()
    let name = nameBytes.isEmpty ? nil : String(decoding: nameBytes, as: UTF8.self)
    var keys = SensorKeys()
    if input.bool() {
        let bytes = input.bool() ? key : input.take(16) + [UInt8](repeating: 0, count: 16)
        keys = try! SensorKeys([address: Array(bytes.prefix(16))])
    }
    var ad = SensorAdvertisement(address: address, name: name)
    while !input.isAtEnd {
        let kind = input.byte()
        if kind & 1 == 0 {
            let uuid = kind >= 0xF0 ? UInt16(truncatingIfNeeded: input.integer(2)) : serviceUUIDs[Int(kind >> 1) % serviceUUIDs.count]
            ad.serviceData[BluetoothUUID(uint16: uuid)] = input.lengthPrefixed()
        } else {
            let company = kind >= 0xF0 ? UInt16(truncatingIfNeeded: input.integer(2)) : companies[Int(kind >> 1) % companies.count]
            ad.manufacturerData[company] = input.lengthPrefixed()
        }
    }
    let result = SensorDecoders.decode(ad, keys: keys)
    check(result == SensorDecoders.decode(ad, keys: keys), "decoding is not deterministic")
    var decoder = SensorDecoder(keys: keys)
    let first = decoder.decode(ad)
    check(first == result, "SensorDecoder's first decoding differs from SensorDecoders': \(String(describing: first)) \(String(describing: result))")
    check(decoder.decode(ad) == first, "the same advertisement decoded again differs")
    inspect(result)
}

func sealed(_ input: inout FuzzInput) {
    let counter = UInt32(truncatingIfNeeded: input.integer(4))
    let payload = input.rest()
    let counterBytes = (0..<4).map { UInt8(truncatingIfNeeded: counter >> (8 * UInt32($0))) }
    guard let sealed = AESCCM.seal(plaintext: payload, key: key, nonce: address.bytes + [0xD2, 0xFC, 0x41] + counterBytes, tagLength: 4) else {
        check(false, "libcrypto refused to seal \(payload.count) bytes")
        return
    }
    let frame = [0x41] + sealed.ciphertext + counterBytes + sealed.tag
    let ad = SensorAdvertisement(address: address, serviceData: [BTHome.serviceUUID: frame])
    let result = SensorDecoders.decode(ad, keys: try! SensorKeys([address: key]))
    if case .failure(let error)? = result {
        check(error.kind != .authenticationFailed && error.kind != .noKey, "a sealed frame did not authenticate: \(error)")
    }
    if case .success(let reading)? = result {
        check(reading.encrypted && reading.counter == counter, "the counter \(String(describing: reading.counter)) is not \(counter)")
    }
    inspect(result)
}

/// The properties every result must have.
func inspect(_ result: Result<SensorReading, SensorDecodingError>?) {
    switch result {
    case nil:
        return
    case .failure(let error):
        check(!error.detail.contains("\n"), "a failure's detail is not one line: \(error.detail)")
        _ = error.description
    case .success(let reading):
        let keyed = reading.keyedMeasurements
        check(keyed.count == reading.measurements.count, "keyed measurements lost some")
        check(Set(keyed.map(\.key)).count == keyed.count, "two measurements share a key: \(keyed.map(\.key))")
        _ = reading.summary
        if let partial = reading.partial { check(!partial.detail.contains("\n"), "a partial's detail is not one line") }
        if reading.format == .bthome { roundTrip(reading) }
    }
}

/// A BTHome reading the encoder accepts decodes from the encoder's frame to the same values.
func roundTrip(_ reading: SensorReading) {
    let values = reading.keyedMeasurements.map { (name: $0.key, value: $0.value) }
    guard let encoder = try? BTHomeEncoder(values) else { return }
    guard let again = try? BTHome.frame(encoder.serviceData, address: address, key: nil) else {
        check(false, "the encoder's frame \(encoder.serviceData) does not decode")
        return
    }
    let sorted = { (m: [SensorMeasurement]) in m.map { "\($0.quantity.key)=\($0.value)" } }
    // the encoder orders objects by id: compare per quantity, in order
    for quantity in Set(reading.measurements.map(\.quantity)) {
        let before = reading.measurements.filter { $0.quantity == quantity }
        let after = again.measurements.filter { $0.quantity == quantity }
        check(before.count == after.count && zip(before, after).allSatisfy { close($0.value, $1.value) },
              "round trip of \(quantity.key): \(sorted(before)) became \(sorted(after))")
    }
}

/// Equal, numbers within the rounding of the finest factor that could carry them.
func close(_ a: SensorValue, _ b: SensorValue) -> Bool {
    if case .number(let x) = a, case .number(let y) = b { return abs(x - y) <= 1e-6 * max(1, abs(x)) }
    return a == b
}
