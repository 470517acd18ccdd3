import BluectlDBus

/// An open L2CAP connection-oriented channel over LE (CoreBluetooth's
/// `CBL2CAPChannel`): a pipe to one PSM of one device, with LE credit based
/// flow control, for bulk data that GATT carries poorly. Made by
/// `Peripheral.openL2CAPChannel` (a central opening one) or received from
/// `L2CAPListener.channels` (a published one accepting).
///
/// Data goes both ways at once as SDUs (service data units) of at most
/// `sendMTU` bytes out and `receiveMTU` bytes in: `send` and `received`.
/// Both hold back a fast side: `send` waits while a bounded amount is not
/// yet written to the socket, and a consumer that does not take what
/// arrived stops the reading. The socket is watched by the central's event
/// loop, in the same poll as the bus; no thread is used.
///
/// `close()` sends what was handed in, then closes. Dropping the channel
/// closes it at once, dropping what was not sent. L2CAP has no half-close:
/// either side's close ends both directions (docs/l2cap.md).
public final class L2CAPChannel: Sendable, CustomStringConvertible {
    /// The device at the other end.
    public let peer: BluetoothAddress
    /// Whether `peer` is a public or a random address.
    public let peerAddressType: AddressType
    /// The PSM the channel was opened to (for an accepted channel: the listener's).
    public let psm: L2CAPPSM
    /// The adapter it runs on ("hci0").
    public let adapter: String
    /// The largest SDU the peer takes (its MTU, BT_SNDMTU); `send` cuts longer data.
    public let sendMTU: Int
    /// The largest SDU this side takes (BT_RCVMTU).
    public let receiveMTU: Int
    /// The link's security when the channel opened (the kernel's BT_SECURITY).
    public let security: L2CAPSecurity
    /// The encryption key's size in bytes (0: not encrypted).
    public let keySize: Int
    let engine: L2CAPChannelEngine

    init(engine: L2CAPChannelEngine, peer: BluetoothAddress, peerAddressType: AddressType, psm: L2CAPPSM, adapter: String,
         security: L2CAPSecurity, keySize: Int) {
        self.engine = engine
        self.peer = peer
        self.peerAddressType = peerAddressType
        self.psm = psm
        self.adapter = adapter
        self.sendMTU = engine.sendMTU
        self.receiveMTU = engine.receiveMTU
        self.security = security
        self.keySize = keySize
        engine.loop.execute { engine.start() }
    }

    deinit {
        let engine = engine
        engine.loop.execute { engine.close() }
    }

    /// "L2CAP channel to PSM 0x0080 of AA:BB:…".
    public var description: String { "L2CAP channel to PSM \(psm) of \(peer)" }

    /// Sends `bytes` as SDUs of at most `sendMTU` bytes each (so data of at
    /// most that size is one SDU: message boundaries are kept). Returns once
    /// the bytes are queued; waits first while about 256 KiB wait to be
    /// written (the peer's credits and the controller set the pace). Throws
    /// once the channel has ended: `.disconnected` when it was closed or the
    /// link went down, or the socket's error.
    public func send(_ bytes: [UInt8]) async throws {
        try await engine.send(bytes)
    }

    /// The SDUs received, in order, each at most `receiveMTU` bytes. Ends
    /// when the channel does: normally when either side closed it, with
    /// the error when it failed (the link lost: `.disconnected`). One
    /// consumer at a time; what it has not taken holds back the reading.
    public var received: Incoming { Incoming(engine: engine) }

    /// The SDUs of a channel (`received`).
    public struct Incoming: AsyncSequence, Sendable {
        /// One SDU.
        public typealias Element = [UInt8]
        let engine: L2CAPChannelEngine

        /// Starts taking SDUs.
        public func makeAsyncIterator() -> Iterator { Iterator(engine: engine) }

        /// Takes what has arrived in one hand-over from the loop, then hands it out one by one.
        public struct Iterator: AsyncIteratorProtocol {
            let engine: L2CAPChannelEngine
            var batch: [[UInt8]] = []
            var index = 0
            var done = false

            /// The next SDU; nil once the channel has ended normally.
            public mutating func next() async throws -> [UInt8]? {
                while true {
                    if index < batch.count {
                        defer { index += 1 }
                        return batch[index]
                    }
                    if done { return nil }
                    batch = []
                    index = 0
                    let (sdus, end) = try await take()
                    batch = sdus
                    if sdus.isEmpty, let end {
                        done = true
                        try end.get()
                        return nil
                    }
                }
            }

            private func take() async throws -> ([[UInt8]], Result<Void, BluetoothError>?) {
                let engine = engine
                let answer = HandOff<([[UInt8]], Result<Void, BluetoothError>?)>()
                @Sendable func attempt() {
                    if let taken = engine.take(orWhenReceived: { attempt() }) { answer.settle(.success(taken)) }
                }
                engine.loop.execute { attempt() }
                return try await withTaskCancellationHandler {
                    try await answer.wait()
                } onCancel: {
                    if answer.settle(.failure(CancellationError())) { engine.loop.execute { engine.cancelWaitingForData() } }
                }
            }
        }
    }

    /// Waits (at most `timeout`) until everything handed to `send` is
    /// written and the kernel has handed it all to the controller (it holds
    /// SDUs back until the peer's credits let them go). True when it has;
    /// false at the timeout, when cancelled, or when the channel ended first.
    /// That the controller has sent is not that the peer has read: see
    /// `close(timeout:)`. Flush before closing the central manager: its
    /// loop (timers, the socket's events) ends with it.
    @discardableResult
    public func flush(timeout: Duration = .seconds(30)) async -> Bool {
        let engine = engine
        let done = await Deadline(after: timeout).run { () async -> Bool in
            guard await engine.drained() else { return false }
            return await engine.whenKernelQueueEmpty {
                guard engine.isOpen else { return false }
                return (engine.unsentInKernel ?? 0) > 0 ? nil : true
            }
        }
        return done ?? false
    }

    /// Sends what was handed in (`flush(timeout:)`), then closes the
    /// channel. L2CAP cannot close one direction only: what the peer still
    /// sends is lost. And the peer may not get the last SDUs: Linux 6.1
    /// reports a channel's end to a reader before the SDUs still queued in
    /// its socket (docs/l2cap.md), so a peer that reads slower than the
    /// link can lose what it had not read yet. Where that matters the peer
    /// should confirm receipt, or close first. SDUs received and not yet
    /// taken stay readable from `received`.
    public func close(timeout: Duration = .seconds(30)) async {
        let engine = engine
        await flush(timeout: timeout)
        await engine.loop.submit { engine.close() }
    }

    /// Bytes written to and read from the socket so far.
    public var byteCounts: (sent: Int, received: Int) {
        get async {
            let engine = engine
            return await engine.loop.submit { engine.counts }
        }
    }

    // MARK: - For a pump on the loop (the command line's stdin)

    /// Offers `bytes` on the loop (as `send`, without waiting): whether
    /// more may be offered now; `.ended` once the channel has. Loop only.
    package func offerOnLoop(_ bytes: some Collection<UInt8>) -> SendOffer { engine.offer(bytes) }

    /// Calls `body` on the loop once more may be offered. Loop only.
    package func whenRoomOnLoop(_ body: @escaping () -> Void) { engine.whenRoom(body) }

    /// Hands each SDU to `sink` on the loop as it is read, instead of
    /// `received` (no thread hop per SDU); `onEnd` once the channel has
    /// ended. `batching`: after a read that found SDUs, how long the socket
    /// is left before the next (SDUs reach the sink up to that much later,
    /// a few per wake-up of the loop rather than one). See
    /// `L2CAPChannelEngine.deliver(to:onEnd:batching:)`.
    package func receiveOnLoop(_ sink: @escaping @Sendable (UnsafeRawBufferPointer) -> Bool,
                               onEnd: @escaping @Sendable (Result<Void, BluetoothError>) -> Void,
                               batching: Duration = .zero) {
        let engine = engine
        engine.loop.execute { engine.deliver(to: sink, onEnd: onEnd, batching: batching) }
    }

    /// Stops reading the socket (from `receiveOnLoop`'s sink, whose
    /// consumer has no room) until `resumeReceiving`: the kernel's buffer,
    /// then the peer's LE credits, hold the peer back. Loop only.
    package func pauseReceivingOnLoop() { engine.pauseReceiving() }

    /// Reads the socket again after `pauseReceivingOnLoop`; from any thread.
    package func resumeReceiving() {
        let engine = engine
        engine.loop.execute { engine.resumeReceiving() }
    }
}
