// SensorBytes: the fixed-offset reads the sensor decoders of fixed-layout formats (Ruuvi,
// Xiaomi, pvvx, ATC1441, SwitchBot, Govee, Inkbird) make. A decoder checks a frame's length
// before it reads; every read here still checks its own bounds and answers nil rather than
// trapping, so a wrong length check costs a decoding, never the process.

/// A frame's bytes, read at offsets, in either byte order.
struct SensorBytes {
    /// The bytes, indexed from 0.
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Of any array slice, re-indexed from 0.
    init(_ slice: ArraySlice<UInt8>) {
        self.bytes = Array(slice)
    }

    var count: Int { bytes.count }

    /// The byte at `i`, or nil past the end.
    func u8(_ i: Int) -> UInt8? {
        i >= 0 && i < bytes.count ? bytes[i] : nil
    }

    /// `n` bytes from `i`, most significant last (`bigEndian` false) or first; nil when they
    /// are not all there.
    func unsigned(_ i: Int, _ n: Int, bigEndian: Bool) -> UInt32? {
        guard n >= 1, n <= 4, i >= 0, i <= bytes.count - n else { return nil }
        var v: UInt32 = 0
        for k in 0..<n {
            let b = UInt32(bytes[bigEndian ? i + k : i + n - 1 - k])
            v = v << 8 | b
        }
        return v
    }

    /// As `unsigned`, read as two's complement of `n` bytes.
    func signed(_ i: Int, _ n: Int, bigEndian: Bool) -> Int32? {
        guard let v = unsigned(i, n, bigEndian: bigEndian) else { return nil }
        let shift = UInt32(32 - 8 * n)
        return Int32(bitPattern: v << shift) >> Int32(shift)
    }

    func u16le(_ i: Int) -> UInt16? { unsigned(i, 2, bigEndian: false).map { UInt16($0) } }
    func u16be(_ i: Int) -> UInt16? { unsigned(i, 2, bigEndian: true).map { UInt16($0) } }
    func s16le(_ i: Int) -> Int16? { signed(i, 2, bigEndian: false).map { Int16($0) } }
    func s16be(_ i: Int) -> Int16? { signed(i, 2, bigEndian: true).map { Int16($0) } }

    /// An IEEE 754 single (little-endian) as the decimal it was written from: the shortest
    /// decimal that reads back as the same single (21.37, not 21.3700008392334). Nil for
    /// NaN and infinities, which no measurement is.
    func float32le(_ i: Int) -> Double? {
        guard let raw = unsigned(i, 4, bigEndian: false) else { return nil }
        let f = Float(bitPattern: raw)
        guard f.isFinite else { return nil }
        return Double("\(f)")
    }
}

/// `raw` × 10^`exponent`, correctly rounded: a frame's fixed-point value as the decimal it
/// stands for (2255 × 10⁻³ is 2.255, not 2.2550000000000003). One IEEE division (or
/// multiplication) by a power of ten that a Double holds exactly rounds correctly, as the
/// reference decoders' `raw / 1000` does.
func sensorDecimal(_ raw: some BinaryInteger, _ exponent: Int) -> Double {
    let scale = exponent < 0 ? -exponent : exponent
    guard scale < powersOfTen.count else { return Double(Int64(raw)) * pow10Fallback(exponent) }
    return exponent < 0 ? Double(Int64(raw)) / powersOfTen[scale] : Double(Int64(raw)) * powersOfTen[scale]
}

/// 10⁰ … 10²²: the powers of ten a Double holds exactly.
private let powersOfTen: [Double] = (0...22).map { k in (0..<k).reduce(1.0) { acc, _ in acc * 10 } }

private func pow10Fallback(_ exponent: Int) -> Double {
    Double("1e\(exponent)") ?? 0
}

/// `0x0a1b`: an object id or product id as failure details write it.
func sensorHex(_ value: UInt16) -> String {
    "0x" + ByteFormats.hex([UInt8(value >> 8), UInt8(truncatingIfNeeded: value)])
}
