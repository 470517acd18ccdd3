import BluectlDBus

/// The discovery an adapter runs while this process looks for devices BlueZ
/// does not know yet (`CentralManager.findDevice`), the loop's: one per
/// adapter, shared by every finder on it. The first finder starts it, the
/// last to leave (found, out of time, cancelled) stops it, and each finder
/// watches BlueZ's tree for its own device meanwhile. bluetoothd keeps one
/// discovery per client (a second `StartDiscovery` from the same connection
/// is `InProgress`, and one `StopDiscovery` ends it for every caller), so
/// finders that each ran a scan of their own had to take turns: with two
/// unknown devices and a short `--timeout`, the second ran out of time
/// waiting for the first's scan to end.
///
/// A finder that joins while the discovery is being stopped waits for the
/// stop to be answered, then starts it again: a `StartDiscovery` never
/// overtakes the `StopDiscovery` before it.
final class FindingDiscovery: Sendable {
    private enum Phase {
        /// StartDiscovery on its way.
        case starting
        case running(ScanSession)
        /// StopDiscovery on its way.
        case stopping
    }

    private struct Entry {
        var phase: Phase = .starting
        /// The finders scanning now, each with its hand-off (settled at its
        /// time limit, or with the discovery's failure) and its timer.
        var finders: [UInt64: (handOff: HandOff<Void>, timer: EventLoop.TimerID)] = [:]
        /// Last finders out, waiting for the StopDiscovery to be answered.
        var whenStopped: [HandOff<Void>] = []
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
    /// found its device); returns then, after the `StopDiscovery` when it
    /// was the last finder. Throws when the discovery cannot be started.
    func scan(on adapter: AdapterInfo, of central: CentralManager, for timeout: Duration) async throws {
        guard timeout > .zero else { return }
        let handOff = HandOff<Void>()
        let loop = state.loop
        let key = adapter.path
        let id: UInt64 = await loop.submit { [self] in
            state.value.lastID += 1
            let id = state.value.lastID
            let timer = loop.schedule(after: timeout) { handOff.settle(.success(())) }
            let isNew = state.value.entries[key] == nil
            state.value.entries[key, default: Entry()].finders[id] = (handOff, timer)
            if isNew { start(adapter, of: central) }
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
        let stopped = await loop.submit { [self] in leave(key, id) }
        if let stopped { _ = try? await stopped.wait() }
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
            let stopNow = await state.loop.submit { [self] () -> Bool in
                state.value.entries[key]?.phase = .running(session)
                return state.value.entries[key]?.finders.isEmpty ?? true
            }
            if stopNow { await stop(key, session) }
            // With a sink, `discoveries` only ends (stopped) or fails
            // (bluetoothd or the adapter gone): either way, nothing more is
            // found by this discovery. Finders still scanning end as at
            // their time limit (each still watches the tree until then).
            do { for try await _ in session.discoveries {} } catch {}
            await state.loop.submit { [self] in ended(key, session) }
        }
    }

    /// On the loop: the finder `id` leaves; the last one out stops the
    /// discovery and gets the hand-off that settles once it is stopped.
    private func leave(_ key: ObjectPath, _ id: UInt64) -> HandOff<Void>? {
        guard var entry = state.value.entries[key], let finder = entry.finders.removeValue(forKey: id) else { return nil }
        state.loop.cancel(finder.timer)
        defer { state.value.entries[key] = entry }
        guard entry.finders.isEmpty else { return nil }
        let stopped = HandOff<Void>()
        entry.whenStopped.append(stopped)
        if case .running(let session) = entry.phase {
            entry.phase = .stopping
            Task { [self] in await stop(key, session) }
        }
        return stopped
    }

    /// StopDiscovery; then the entry goes, or starts again for finders that came meanwhile.
    private func stop(_ key: ObjectPath, _ session: ScanSession) async {
        await state.loop.submit { [self] in state.value.entries[key]?.phase = .stopping }
        try? await session.stop()
        await state.loop.submit { [self] in
            guard var entry = state.value.entries[key] else { return }
            for waiter in entry.whenStopped { waiter.settle(.success(())) }
            entry.whenStopped = []
            if entry.finders.isEmpty {
                state.value.entries[key] = nil
            } else {
                state.value.entries[key] = entry
                start(session.adapter, of: session.central)
            }
        }
    }

    /// On the loop: StartDiscovery failed; every finder waiting fails with it.
    private func failed(_ key: ObjectPath, _ error: any Error) {
        guard let entry = state.value.entries.removeValue(forKey: key) else { return }
        for (_, finder) in entry.finders {
            state.loop.cancel(finder.timer)
            finder.handOff.settle(.failure(error))
        }
        for waiter in entry.whenStopped { waiter.settle(.success(())) }
    }

    /// On the loop: `session` ended by itself (not stopped by the last
    /// finder): the finders end their scanning as at their time limit.
    private func ended(_ key: ObjectPath, _ session: ScanSession) {
        guard let entry = state.value.entries[key], case .running(let running) = entry.phase, running.end === session.end else { return }
        state.value.entries[key] = nil
        for (_, finder) in entry.finders {
            state.loop.cancel(finder.timer)
            finder.handOff.settle(.success(()))
        }
        for waiter in entry.whenStopped { waiter.settle(.success(())) }
    }
}
