// The plaintext frame decoder: frames in any split, the bounds, every error
// final. Frames built by hand from the layout (0x00, varint length, varint
// type, payload), the one aioesphomeapi's plain_text.py reads.
import Testing
@testable import BluectlProxy

@Suite struct FrameDecoderTests {
    /// A HelloResponse-sized frame and an empty one, back to back.
    let wire: [UInt8] = [0x00, 0x03, 0x02, 0x08, 0x01, 0x10] + [0x00, 0x00, 0x07]

    @Test func framesInOneRead() throws {
        var decoder = FrameDecoder()
        decoder.append(wire)
        #expect(try decoder.next() == PlaintextFrame(type: 2, payload: [0x08, 0x01, 0x10]))
        #expect(try decoder.next() == PlaintextFrame(type: 7, payload: []))
        #expect(try decoder.next() == nil)
        #expect(decoder.pendingCount == 0)
    }

    @Test func framesByteByByte() throws {
        var decoder = FrameDecoder()
        var frames: [PlaintextFrame] = []
        for byte in wire {
            decoder.append([byte])
            while let frame = try decoder.next() { frames.append(frame) }
        }
        #expect(frames == [PlaintextFrame(type: 2, payload: [0x08, 0x01, 0x10]), PlaintextFrame(type: 7, payload: [])])
    }

    @Test func encodeDecodeRoundTrip() throws {
        // Lengths and types across the varint's 1-, 2- and 3-byte forms.
        for (length, type) in [(0, 1), (127, 127), (128, 128), (300, 16_383), (65_535, 16_384)] {
            let frame = PlaintextFrame(type: UInt32(type), payload: (0..<length).map { UInt8(truncatingIfNeeded: $0) })
            var decoder = FrameDecoder()
            decoder.append(frame.bytes)
            #expect(try decoder.next() == frame, "length \(length), type \(type)")
            #expect(decoder.pendingCount == 0)
        }
    }

    @Test func varintEncoding() {
        #expect(PlaintextFrame(type: 300, payload: [1]).bytes == [0x00, 0x01, 0xAC, 0x02, 0x01])
    }

    @Test func lengthBound() throws {
        var decoder = FrameDecoder()
        decoder.append([0x00, 0xFF, 0xFF, 0x03])   // 65,535: accepted, waits for the payload
        #expect(try decoder.next() == nil)
        var over = FrameDecoder()
        over.append([0x00, 0x80, 0x80, 0x04])      // 65,536
        #expect(throws: FrameError.tooLong(65_536)) { try over.next() }
    }

    @Test func errorsAreFinal() {
        var decoder = FrameDecoder()
        decoder.append([0x01, 0x00, 0x00])
        #expect(throws: FrameError.badPreamble(0x01)) { try decoder.next() }
        decoder.append([0x00, 0x00, 0x07])         // a good frame after the error is not read
        #expect(throws: FrameError.badPreamble(0x01)) { try decoder.next() }
        #expect("\(FrameError.badPreamble(0x01))".contains("Noise"))
        #expect("\(FrameError.badPreamble(0x42))" == "bad preamble 0x42")
    }

    @Test func longVarintRefused() {
        var length = FrameDecoder()
        length.append([0x00, 0x80, 0x80, 0x80, 0x80, 0x01])
        #expect(throws: FrameError.varintTooLong) { try length.next() }
        var type = FrameDecoder()
        type.append([0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        #expect(throws: FrameError.varintTooLong) { try type.next() }
    }

    @Test func incompleteHeaderWaits() throws {
        var decoder = FrameDecoder()
        decoder.append([0x00, 0x80])   // a varint cut in the middle
        #expect(try decoder.next() == nil)
        decoder.append([0x01, 0x05])   // 128 bytes of type 5: still waiting for them
        #expect(try decoder.next() == nil)
        decoder.append([UInt8](repeating: 0xAA, count: 128))
        #expect(try decoder.next() == PlaintextFrame(type: 5, payload: [UInt8](repeating: 0xAA, count: 128)))
    }
}
