import BluectlDBus

/// One subscriber's share of a characteristic's notifications
/// (`Peripheral.subscribe(to:)`, `Peripheral.acquireNotifications(for:)`).
///
/// All subscribers of a characteristic in this process share one BlueZ
/// session (one StartNotify, or one AcquireNotify socket): the first one
/// starts it, each later one joins it, and the last one to leave — by
/// `stop()`, or by cancelling or dropping its iteration of `values` — ends
/// it. Every subscriber gets every value from its joining on.
///
/// `values` keeps at most 4,096 values a consumer has not taken yet; older
/// ones are dropped first (a value sink passed to `subscribe` has no buffer:
/// it runs on the central's event loop, where the value arrives).
public final class NotificationSession: Sendable {
    /// Takes each value where it arrives (see `Peripheral.subscribe(to:onValue:onSharing:)`).
    public typealias ValueSink = @Sendable ([UInt8]) -> Void

    /// Whose StartNotify session the values come from.
    public enum Sharing: Sendable, Equatable {
        /// This process's own StartNotify.
        case own
        /// Another client's session, already on when this process started.
        case joined
        /// The shared session ended and this process started its own.
        case tookOver
    }
    /// Hears a change of `Sharing` (on the session's task).
    public typealias SharingSink = @Sendable (Sharing) -> Void

    /// How many values `values` holds for a slow consumer before dropping the oldest.
    public static let bufferLimit = 4096

    /// The characteristic notifying.
    public let characteristic: GattCharacteristic
    /// How the BlueZ session started: `.own` or `.joined` (another client's).
    public let sharing: Sharing
    /// One element per notification or indication, in arrival order (only
    /// the end or the failure when a value sink was given). Fails when the
    /// device disconnects.
    public let values: AsyncThrowingStream<[UInt8], any Error>
    private let share: NotifyShare
    private let id: UInt64

    init(share: NotifyShare, id: UInt64, sharing: Sharing, values: AsyncThrowingStream<[UInt8], any Error>) {
        self.share = share
        self.id = id
        self.characteristic = share.characteristic
        self.sharing = sharing
        self.values = values
    }

    /// Leaves the session: `values` ends; the last subscriber to leave ends
    /// BlueZ's session too (StopNotify, or the socket closed) and waits for
    /// that, at most a few seconds.
    public func stop() async {
        await share.leave(id)
    }
}

/// Which BlueZ session a share is: StartNotify or AcquireNotify, of one characteristic.
struct NotifyKey: Hashable, Sendable {
    let characteristic: ObjectPath
    let acquire: Bool
}

/// The subscribers of one BlueZ notification session in this process, and
/// the session (`NotifyEngine`) they share. The loop's: values fan out on it
/// (where they arrive), and joining and leaving tasks hand it their changes.
final class NotifyShare: Sendable {
    typealias Start = @Sendable (_ onValue: @escaping NotificationSession.ValueSink,
                                 _ onSharing: @escaping NotificationSession.SharingSink) async throws -> NotifyEngine

    private struct Subscriber: Sendable {
        let id: UInt64
        let deliver: NotificationSession.ValueSink
        let onSharing: NotificationSession.SharingSink?
        let finish: @Sendable ((any Error)?) -> Void
    }

    private struct State {
        var nextID: UInt64 = 1
        var subscribers: [Subscriber] = []
        /// No one may join any more: the session ended or its last subscriber left.
        var closed = false
        var engine: Task<NotifyEngine, any Error>?
        /// The session's end, once the last subscriber left.
        var stopping: Task<Void, Never>?
        /// Someone watches the started session for its end (see `watch`).
        var watched = false
    }

    let characteristic: GattCharacteristic
    private let key: NotifyKey
    /// The peripheral's table of shares (see `forget()`): holding it, not
    /// the peripheral, and leaving it when the share closes, ends the cycle.
    private let table: LoopBound<Peripheral.LoopState>
    private let start: Start
    private let state: LoopBound<State>
    private var loop: EventLoop { state.loop }

    init(peripheral: Peripheral, characteristic: GattCharacteristic, key: NotifyKey, start: @escaping Start) {
        self.table = peripheral.local
        self.characteristic = characteristic
        self.key = key
        self.start = start
        state = LoopBound(State(), loop: peripheral.local.loop)
    }

    /// Whether a new subscriber may still join (on the loop).
    var isOpen: Bool { !state.value.closed }

    /// Adds a subscriber and, for the first, starts the session; nil when
    /// the share closed meanwhile (the caller makes a new one).
    func join(onValue: NotificationSession.ValueSink?,
              onSharing: NotificationSession.SharingSink?) async throws -> NotificationSession? {
        let (values, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream(
            bufferingPolicy: .bufferingNewest(NotificationSession.bufferLimit))
        let deliver: NotificationSession.ValueSink = onValue ?? { continuation.yield($0) }
        // Registered before the session starts, so the first value is not missed.
        let joined = await loop.submit { [self] () -> (id: UInt64, engine: Task<NotifyEngine, any Error>)? in
            guard !state.value.closed else { return nil }
            let id = state.value.nextID
            state.value.nextID += 1
            state.value.subscribers.append(Subscriber(id: id, deliver: deliver, onSharing: onSharing, finish: { error in
                if let error { continuation.finish(throwing: error) } else { continuation.finish() }
            }))
            if state.value.engine == nil {
                state.value.engine = Task { [start] in
                    try await start({ [weak self] in self?.fanOut($0) }, { [weak self] in self?.fanOut($0) })
                }
            }
            return (id, state.value.engine!)
        }
        guard let (id, engineTask) = joined else { return nil }
        let engine: NotifyEngine
        do {
            engine = try await withTaskCancellationHandler {
                try await engineTask.value
            } onCancel: { [weak self] in
                // The start is cancelled only for a subscriber who waits alone.
                self?.loop.execute { [weak self] in
                    if self?.state.value.subscribers.count == 1 { engineTask.cancel() }
                }
            }
        } catch {
            // The start failed (or this subscriber's task was cancelled): out.
            await leave(id)
            throw error
        }
        if await loop.submit({ [self] in isFirstWatcher() }) { watch(engine) }
        continuation.onTermination = { [weak self] termination in
            guard case .cancelled = termination, let self else { return }
            // The consumer stopped iterating: its share ends.
            Task { await self.leave(id) }
        }
        return NotificationSession(share: self, id: id, sharing: engine.sharing, values: values)
    }

    /// Removes subscriber `id`; the last one ends the session. Returns once
    /// the session's end (StopNotify, or the socket closed) is done, also
    /// when another leaver started it: a process may exit right after.
    func leave(_ id: UInt64) async {
        let (subscriber, stopping) = await loop.submit { [self] () -> (Subscriber?, Task<Void, Never>?) in
            var subscriber: Subscriber?
            if let index = state.value.subscribers.firstIndex(where: { $0.id == id }) {
                subscriber = state.value.subscribers.remove(at: index)
            }
            guard state.value.subscribers.isEmpty, !state.value.closed else { return (subscriber, state.value.stopping) }
            state.value.closed = true
            let engine = state.value.engine
            state.value.stopping = Task {
                guard let running = try? await engine?.value else { return }   // it never started
                await running.stop()
            }
            forget()
            return (subscriber, state.value.stopping)
        }
        subscriber?.finish(nil)
        await stopping?.value
    }

    // MARK: - The session's side

    /// On the loop: whether the caller is the first to see the started engine (it then watches it).
    private func isFirstWatcher() -> Bool {
        defer { state.value.watched = true }
        return !state.value.watched
    }

    /// Ends every subscriber's stream as the session ends (the engine was
    /// started with sinks, so its own stream only ends or fails).
    private func watch(_ engine: NotifyEngine) {
        Task { [weak self] in
            var failure: (any Error)?
            do { for try await _ in engine.values {} } catch { failure = error }
            self?.loop.execute { [weak self, failure] in self?.end(failure) }
        }
    }

    /// On the loop: the session ended.
    private func end(_ failure: (any Error)?) {
        state.value.closed = true
        let subscribers = state.value.subscribers
        state.value.subscribers = []
        forget()
        for subscriber in subscribers { subscriber.finish(failure) }
    }

    /// On the loop: the peripheral's table no longer hands this share out.
    private func forget() {
        if table.value.notifyShares[key] === self { table.value.notifyShares[key] = nil }
    }

    /// On the loop (values arrive there).
    private func fanOut(_ bytes: [UInt8]) {
        for subscriber in state.value.subscribers { subscriber.deliver(bytes) }
    }

    private func fanOut(_ sharing: NotificationSession.Sharing) {
        for subscriber in state.value.subscribers { subscriber.onSharing?(sharing) }
    }
}

extension Peripheral {
    /// The share of the characteristic's StartNotify or AcquireNotify
    /// session, joined by a new subscriber (a new share when there is none
    /// open); refused at once for a characteristic that cannot notify.
    func subscribeShared(_ characteristic: GattCharacteristic, acquire: Bool, onValue: NotificationSession.ValueSink?,
                         onSharing: NotificationSession.SharingSink?,
                         start: @escaping NotifyShare.Start) async throws -> NotificationSession {
        guard characteristic.properties.canNotify else {
            throw BluetoothError.notSupported("characteristic \(characteristic.uuid.label) cannot notify or indicate (flags: \(characteristic.flags.joined(separator: ",")))")
        }
        let key = NotifyKey(characteristic: characteristic.path, acquire: acquire)
        while true {
            let share = await local.loop.submit { [self] () -> NotifyShare in
                if let open = local.value.notifyShares[key], open.isOpen { return open }
                let made = NotifyShare(peripheral: self, characteristic: characteristic, key: key, start: start)
                local.value.notifyShares[key] = made
                return made
            }
            if let session = try await share.join(onValue: onValue, onSharing: onSharing) { return session }
        }
    }
}
