import BluectlDBus

/// The discovery an adapter runs while this process looks for devices BlueZ
/// does not know yet (`CentralManager.findDevice`), the loop's: one per
/// adapter, shared by every finder on it. The first finder starts it; each
/// finder watches BlueZ's tree for its own device meanwhile and leaves when
/// it is found (or its time is up); a moment (`linger`) after the last one
/// left, it is stopped, so finders that start one after the other, as the
/// devices of one command do, still share it. bluetoothd keeps one
/// discovery per client (a second `StartDiscovery` from the same connection
/// is `InProgress`, and one `StopDiscovery` ends it for every caller), so
/// finders that each ran a scan of their own had to take turns: with two
/// unknown devices and a short `--timeout`, the second ran out of time
/// waiting for the first's scan to be stopped.
///
/// A finder that comes while the discovery is being stopped waits for
/// bluetoothd's answer to `StopDiscovery`, then starts it again: a
/// `StartDiscovery` never overtakes the stop before it.
final class FindingDiscovery: Sendable {
    /// How long a discovery nobody needs any more keeps running.
    static let linger: Duration = .milliseconds(500)

    private enum Phase {
        /// StartDiscovery on its way.
        case starting
        /// Running; `stopTimer`: nobody needs it, it stops when this fires.
        case running(ScanSession, stopTimer: EventLoop.TimerID?)
        /// StopDiscovery on its way.
        case stopping
    }

    private struct Entry {
        var phase: Phase = .starting
        /// The finders scanning now, each with its hand-off (settled at its
        /// time limit, or with the discovery's failure) and its timer.
        var finders: [UInt64: (handOff: HandOff<Void>, timer: EventLoop.TimerID)] = [:]
    }

    private struct State {
        var entries: [ObjectPath: Entry] = [:]
        var lastID: UInt64 = 0
    }

    private let state: LoopBound<State>

    init(loop: EventLoop) {
        state = LoopBound(State(), loop: loop)
    }

    /// Keeps a discovery running on `adapter` for the calling finder, at
    /// most `timeout` or until the calling task is cancelled (the finder
    /// found its device). Throws when the discovery cannot be started.
    func scan(on adapter: AdapterInfo, of central: CentralManager, for timeout: Duration) async throws {
        guard timeout > .zero else { return }
        let handOff = HandOff<Void>()
        let loop = state.loop
        let key = adapter.path
        let id: UInt64 = await loop.submit { [self] in
            state.value.lastID += 1
            let id = state.value.lastID
            let timer = loop.schedule(after: timeout) { handOff.settle(.success(())) }
            guard var entry = state.value.entries[key] else {
                state.value.entries[key] = Entry(finders: [id: (handOff, timer)])
                start(adapter, of: central)
                return id
            }
            entry.finders[id] = (handOff, timer)
            if case .running(let session, let stopTimer?) = entry.phase {
                loop.cancel(stopTimer)   // needed again
                entry.phase = .running(session, stopTimer: nil)
            }
            state.value.entries[key] = entry
            return id
        }
        var outcome: Result<Void, any Error> = .success(())
        do {
            try await withTaskCancellationHandler {
                try await handOff.wait()
            } onCancel: {
                handOff.settle(.success(()))   // found: leave as at the time limit
            }
        } catch {
            outcome = .failure(error)
        }
        await loop.submit { [self] in leave(key, id) }
        try outcome.get()
    }

    /// On the loop: StartDiscovery (by `startScan`, whose sink ignores the
    /// results: finders read the tree), then the session until it ends.
    private func start(_ adapter: AdapterInfo, of central: CentralManager) {
        let key = adapter.path
        state.value.entries[key]?.phase = .starting
        Task { [self] in
            var options = ScanOptions()
            options.transport = .le
            let session: ScanSession
            do {
                session = try await central.startScan(adapter: adapter, options: options, onDiscovery: { _ in })
            } catch {
                await state.loop.submit { [self] in failed(key, error) }
                return
            }
            await state.loop.submit { [self] in
                state.value.entries[key]?.phase = .running(session, stopTimer: nil)
                if state.value.entries[key]?.finders.isEmpty ?? true { stopSoon(key) }
            }
            // With a sink, `discoveries` only ends (stopped) or fails
            // (bluetoothd or the adapter gone): either way, nothing more is
            // found by this discovery. Finders still scanning end as at
            // their time limit (each still watches the tree until then).
            do { for try await _ in session.discoveries {} } catch {}
            await state.loop.submit { [self] in ended(key, session) }
        }
    }

    /// On the loop: the finder `id` leaves; after the last one the discovery stops soon.
    private func leave(_ key: ObjectPath, _ id: UInt64) {
        guard let finder = state.value.entries[key]?.finders.removeValue(forKey: id) else { return }
        state.loop.cancel(finder.timer)
        if state.value.entries[key]?.finders.isEmpty == true { stopSoon(key) }
    }

    /// On the loop: stops a running discovery nobody needs after `linger`
    /// (a finder that comes meanwhile keeps it); one still starting is
    /// stopped once started.
    private func stopSoon(_ key: ObjectPath) {
        guard case .running(let session, nil)? = state.value.entries[key]?.phase else { return }
        let timer = state.loop.schedule(after: Self.linger) { [self] in
            guard case .running(let current, _)? = state.value.entries[key]?.phase, current.end === session.end,
                  state.value.entries[key]?.finders.isEmpty == true else { return }
            state.value.entries[key]?.phase = .stopping
            Task { [self] in
                try? await session.stop()
                await state.loop.submit { [self] in stopped(key, session) }
            }
        }
        state.value.entries[key]?.phase = .running(session, stopTimer: timer)
    }

    /// On the loop: StopDiscovery was answered; the entry goes, or the
    /// discovery starts again for finders that came meanwhile.
    private func stopped(_ key: ObjectPath, _ session: ScanSession) {
        guard let entry = state.value.entries[key], case .stopping = entry.phase else { return }
        if entry.finders.isEmpty {
            state.value.entries[key] = nil
        } else {
            start(session.adapter, of: session.central)
        }
    }

    /// On the loop: StartDiscovery failed; every finder waiting fails with it.
    private func failed(_ key: ObjectPath, _ error: any Error) {
        guard let entry = state.value.entries.removeValue(forKey: key) else { return }
        for (_, finder) in entry.finders {
            state.loop.cancel(finder.timer)
            finder.handOff.settle(.failure(error))
        }
    }

    /// On the loop: `session` ended by itself (not stopped here: bluetoothd
    /// or the adapter went): the finders end their scanning as at their time limit.
    private func ended(_ key: ObjectPath, _ session: ScanSession) {
        guard let entry = state.value.entries[key], case .running(let running, let stopTimer) = entry.phase,
              running.end === session.end else { return }
        if let stopTimer { state.loop.cancel(stopTimer) }
        state.value.entries[key] = nil
        for (_, finder) in entry.finders {
            state.loop.cancel(finder.timer)
            finder.handOff.settle(.success(()))
        }
    }
}
