// The seed corpus of FuzzProxy: a mode byte, a chunk byte, then the mode's bytes.
import FuzzSupport
@testable import BluectlProxy

enum ProxySeeds {
    static func all() -> [(name: String, bytes: [UInt8])] {
        let hello = PlaintextFrame(type: 1, payload: [0x0a, 0x04] + Array("fuzz".utf8) + [0x10, 0x01, 0x18, 0x0e]).bytes
        let subscribe = PlaintextFrame(type: 66, payload: [0x08, 0x01]).bytes
        let plain: [[UInt8]] = [
            hello, hello + PlaintextFrame(type: 9, payload: []).bytes + PlaintextFrame(type: 7, payload: []).bytes + subscribe,
            [0x00, 0x80, 0x00, 0x07], [0x00, 0xff, 0xff, 0x03, 0x01], [0x01, 0x00], [0x00, 0x02, 0x01, 0x08],
            PlaintextFrame(type: 5, payload: []).bytes + [0x07],
        ]
        var seeds: [(String, [UInt8])] = []
        for (i, s) in plain.enumerated() { seeds.append(("plain-\(i)", [Mode.plain.rawValue, UInt8(i % 3)] + s)) }
        let raw: [[UInt8]] = [
            [0x01, 0x00, 0x00], [0x01, 0x00, 0x00] + NoiseTransport.frame([0x00] + clientHandshake),
            [0x01, 0x00, 0x00] + NoiseTransport.frame([0x00] + [UInt8](repeating: 0x42, count: 48)),
            [0x01, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00, 0x01], [0x00, 0x00, 0x01], [0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x07],
        ]
        for (i, s) in raw.enumerated() { seeds.append(("noise-raw-\(i)", [Mode.noiseRaw.rawValue, UInt8(i % 4)] + s)) }
        func record(_ frame: PlaintextFrame, flip: Bool = false) -> [UInt8] {
            let p = frame.payload
            let plain = [UInt8(frame.type >> 8), UInt8(frame.type & 0xff), UInt8(p.count >> 8), UInt8(p.count & 0xff)] + p
            return [UInt8(plain.count)] + plain + [flip ? 1 : 0, 5]
        }
        let ready: [[UInt8]] = [
            [],
            record(PlaintextFrame(type: 1, payload: [0x0a, 0x02, 0x48, 0x41])) + record(PlaintextFrame(type: 9, payload: [])),
            record(PlaintextFrame(type: 7, payload: [])) + record(PlaintextFrame(type: 66, payload: [0x08, 0x01]), flip: true),
            [0x02, 0x00, 0x01, 0x00, 0x00], [0x05, 0x00, 0x07, 0x00, 0x02, 0x00, 0x00, 0x00],
        ]
        for (i, s) in ready.enumerated() { seeds.append(("noise-ready-\(i)", [Mode.noiseReady.rawValue, UInt8(i * 7 % 11)] + s)) }
        return seeds.map { (name: $0.0, bytes: $0.1) }
    }
}
