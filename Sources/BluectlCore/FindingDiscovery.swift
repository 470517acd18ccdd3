import BluectlDBus

/// The discovery an adapter runs while this process looks for devices BlueZ
/// does not know yet (`CentralManager.findDevice`), the loop's: one per
/// adapter, shared by every finder on it. The first finder starts it; each
/// finder watches BlueZ's tree for its own device meanwhile and leaves when
/// it is found (or its time is up); the last one out stops it, without
/// waiting for the answer (`settle()` waits for it: the command line does
/// before it ends). bluetoothd keeps one discovery per client (a second `StartDiscovery` from the same connection
/// is `InProgress`, and one `StopDiscovery` ends it for every caller), so
/// finders that each ran a scan of their own had to take turns: with two
/// unknown devices and a short `--timeout`, the second ran out of time
/// waiting for the first's scan to be stopped.
///
/// A finder that comes while the discovery is being stopped waits for
/// bluetoothd's answer to `StopDiscovery`, then starts it again: a
/// `StartDiscovery` never overtakes the stop before it.
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
    }

    private struct State {
        var entries: [ObjectPath: Entry] = [:]
        var lastID: UInt64 = 0
        /// `settle()`s waiting for every discovery to be stopped and answered.
        var settling: [HandOff<Void>] = []
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
                state.value.entries[key]?.phase = .running(session)
                if state.value.entries[key]?.finders.isEmpty ?? true { stop(key) }
            }
            // With a sink, `discoveries` only ends (stopped) or fails
            // (bluetoothd or the adapter gone): either way, nothing more is
            // found by this discovery. Finders still scanning end as at
            // their time limit (each still watches the tree until then).
            do { for try await _ in session.discoveries {} } catch {}
            await state.loop.submit { [self] in ended(key, session) }
        }
    }

    /// On the loop: the finder `id` leaves; the last one out stops the discovery.
    private func leave(_ key: ObjectPath, _ id: UInt64) {
        guard let finder = state.value.entries[key]?.finders.removeValue(forKey: id) else { return }
        state.loop.cancel(finder.timer)
        if state.value.entries[key]?.finders.isEmpty == true { stop(key) }
    }

    /// On the loop: StopDiscovery of a running discovery (one still
    /// starting is stopped once started).
    private func stop(_ key: ObjectPath) {
        guard case .running(let session)? = state.value.entries[key]?.phase else { return }
        state.value.entries[key]?.phase = .stopping
        Task { [self] in
            try? await session.stop()
            await state.loop.submit { [self] in stopped(key, session) }
        }
    }

    /// Returns once no discovery of this process's finders is running or
    /// being stopped (StopDiscovery answered): before the process ends, so
    /// that it stops what it started rather than leaving it to bluetoothd
    /// when it leaves the bus. A finder still looking keeps its discovery.
    func settle() async {
        let idle = HandOff<Void>()
        await state.loop.submit { [self] in
            if state.value.entries.values.allSatisfy({ !$0.finders.isEmpty }) {
                idle.settle(.success(()))
            } else {
                state.value.settling.append(idle)
            }
        }
        _ = try? await idle.wait()
    }

    /// On the loop: answers the `settle()`s once nothing is left to stop.
    private func settleIfIdle() {
        guard state.value.entries.values.allSatisfy({ !$0.finders.isEmpty }) else { return }
        for waiter in state.value.settling { waiter.settle(.success(())) }
        state.value.settling = []
    }

    /// On the loop: StopDiscovery was answered; the entry goes, or the
    /// discovery starts again for finders that came meanwhile.
    private func stopped(_ key: ObjectPath, _ session: ScanSession) {
        guard let entry = state.value.entries[key], case .stopping = entry.phase else { return }
        if entry.finders.isEmpty {
            state.value.entries[key] = nil
            settleIfIdle()
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
        settleIfIdle()
    }

    /// On the loop: `session` ended by itself (not stopped here: bluetoothd
    /// or the adapter went): the finders end their scanning as at their time limit.
    private func ended(_ key: ObjectPath, _ session: ScanSession) {
        guard let entry = state.value.entries[key], case .running(let running) = entry.phase,
              running.end === session.end else { return }
        state.value.entries[key] = nil
        for (_, finder) in entry.finders {
            state.loop.cancel(finder.timer)
            finder.handOff.settle(.success(()))
        }
        settleIfIdle()
    }
}
