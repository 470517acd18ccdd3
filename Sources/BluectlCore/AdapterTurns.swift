import BluectlDBus

/// Turns at what an adapter does one at a time for this process, first come
/// first served, the loop's:
///
/// - `.connect`: an LE connection being made. Controllers create one LE
///   connection at a time; a second `Device1.Connect` while one is pending
///   fails with `InProgress` or `le-connection-abort-by-local`, which is
///   how connecting to several devices at once goes wrong in other tools.
///
/// (Finding devices takes no turns: finders share one discovery,
/// `FindingDiscovery`.)
final class AdapterTurns: Sendable {
    enum Kind: Hashable, Sendable {
        case connect
    }

    /// A turn held: give it back with `CentralManager.release(_:)`.
    struct Turn: Sendable {
        fileprivate let key: Key
        fileprivate let id: UInt64
    }

    fileprivate struct Key: Hashable, Sendable {
        let adapter: ObjectPath
        let kind: Kind
    }

    private struct Line {
        var holder: UInt64?
        var waiting: [(id: UInt64, handOff: HandOff<Void>, timer: EventLoop.TimerID)] = []
    }

    private struct State {
        var lines: [Key: Line] = [:]
        var lastID: UInt64 = 0
    }

    private let state: LoopBound<State>

    init(loop: EventLoop) {
        state = LoopBound(State(), loop: loop)
    }

    /// Waits for the turn at `kind` on `adapter`, at most `timeout`
    /// (then `BluetoothError.timeout` naming `what`). `onQueued(ahead)` runs
    /// on the loop when the caller has to wait, with how many are before it.
    /// Cancelling the waiting task leaves the line (`CancellationError`).
    func take(_ kind: Kind, on adapter: ObjectPath, timeout: Duration, what: String,
              onQueued: (@Sendable (_ ahead: Int) -> Void)? = nil) async throws -> Turn {
        let key = Key(adapter: adapter, kind: kind)
        let handOff = HandOff<Void>()
        let loop = state.loop
        let id: UInt64 = await loop.submit { [state] in
            state.value.lastID += 1
            let id = state.value.lastID
            var line = state.value.lines[key] ?? Line()
            if line.holder == nil {
                line.holder = id
                handOff.settle(.success(()))
            } else {
                let timer = loop.schedule(after: timeout) { [self] in
                    if handOff.settle(.failure(BluetoothError.timeout("\(what): still waiting for the adapter's turn"))) {
                        leave(key, id)
                    }
                }
                line.waiting.append((id, handOff, timer))
                onQueued?(line.waiting.count)
            }
            state.value.lines[key] = line
            return id
        }
        try await withTaskCancellationHandler {
            try await handOff.wait()
        } onCancel: {
            if handOff.settle(.failure(CancellationError())) {
                loop.execute { [self] in leave(key, id) }
            }
        }
        return Turn(key: key, id: id)
    }

    /// Gives the turn to the next in line whose wait has not ended.
    func release(_ turn: Turn) {
        state.loop.execute { [self] in
            guard state.value.lines[turn.key]?.holder == turn.id else { return }
            passOn(turn.key)
        }
    }

    /// A waiter that gave up (timeout, cancellation) leaves the line.
    private func leave(_ key: Key, _ id: UInt64) {
        guard let index = state.value.lines[key]?.waiting.firstIndex(where: { $0.id == id }) else { return }
        let left = state.value.lines[key]!.waiting.remove(at: index)
        state.loop.cancel(left.timer)
    }

    private func passOn(_ key: Key) {
        guard var line = state.value.lines[key] else { return }
        line.holder = nil
        while !line.waiting.isEmpty {
            let next = line.waiting.removeFirst()
            state.loop.cancel(next.timer)
            // Its wait may have ended (timeout, cancellation) on the way here.
            if next.handOff.settle(.success(())) {
                line.holder = next.id
                break
            }
        }
        state.value.lines[key] = line.holder == nil ? nil : line
    }
}
