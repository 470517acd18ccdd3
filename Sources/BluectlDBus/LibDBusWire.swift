import CDBus
#if canImport(Glibc)
import Glibc
#endif

// The live wire: libdbus's connection and the I/O thread that is the
// connection's event loop (docs/architecture.md, "One event loop"). It alone
// touches the libdbus connection; other threads hand it jobs and wake it.

extension DBusConnection {
    func startIOThread(_ io: LibDBusWire) {
        startThread(name: "bluectl-dbus-io") { [self] in
            loop.adoptCurrentThread()
            runLoop(io)
            shutDown()
            loop.releaseThread()
            ThreadEnd.run()
            io.ended()
        }
    }

    private func runLoop(_ io: LibDBusWire) {
        let busFD: Int32 = {
            var fd: Int32 = -1
            dbus_connection_get_unix_fd(io.raw, &fd)
            return fd
        }()
        // The poll set, refilled each turn (one array for the loop's life, not one per turn).
        var fds: [pollfd] = []
        fds.reserveCapacity(4)
        // The path of the message before (`RecentPath`): this thread's alone.
        var recentPath = RecentPath()
        while true {
            // 1. run the jobs handed in (calls to send, subscriptions, …)
            loop.runJobs()
            if stopRequested { return }
            // 2. wait for the bus (what libdbus's watches ask for), a wake-up,
            //    a watched descriptor, or the nearest timer
            let watched = loop.watched
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: busFD, events: io.pollEvents, revents: 0))
            fds.append(pollfd(fd: io.wakeFD, events: Int16(POLLIN), revents: 0))
            for watch in watched { fds.append(pollfd(fd: watch.fd, events: watch.events.rawValue, revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), loop.hasJobs ? 0 : millisecondsToNextTimer())
            if ready < 0 && errno != EINTR { return }
            if fds[1].revents & Int16(POLLIN) != 0 {
                var counter: UInt64 = 0
                _ = read(io.wakeFD, &counter, 8)
            }
            // 3. move the bytes poll found, then handle every complete message
            io.handle(fds[0].revents)
            var connected = dbus_connection_get_is_connected(io.raw) != 0
            while let message = dbus_connection_pop_message(io.raw) {
                // what was handed in before this message arrived applies to it
                loop.runJobs()
                let owned = RawMessage(taking: message)
                if !handle(owned, recentPath: &recentPath) { connected = false }
            }
            if !connected { return }
            runDrainHandlers()
            // 4. the watched descriptors that are ready (an AcquireNotify socket, an L2CAP channel, stdin)
            for (index, watch) in watched.enumerated() where fds[index + 2].revents != 0 {
                loop.descriptorReady(watch.id)
                loop.runJobs()
            }
            // 5. the timers whose time has come (call deadlines among them)
            loop.fireDueTimers()
        }
    }

    private func millisecondsToNextTimer() -> Int32 {
        guard let next = loop.nextDeadline else { return -1 }
        let remaining = next - loop.now
        if remaining <= .zero { return 0 }
        let ms = remaining.seconds * 1000
        return Int32(min(ms.rounded(.up), 60_000))
    }
}

/// The libdbus connection and the descriptor that wakes its I/O thread.
final class LibDBusWire: Sendable {
    /// Touched only by the I/O thread (and by `deinit`, once it has stopped).
    nonisolated(unsafe) let raw: OpaquePointer
    let wakeFD: Int32
    /// Posted once the I/O thread has shut the connection down.
    nonisolated(unsafe) private let done = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(raw: OpaquePointer, wakeFD: Int32) {
        self.raw = raw
        self.wakeFD = wakeFD
        sem_init(done, 0, 0)
    }

    deinit {
        dbus_connection_unref(raw)
        _ = closeDescriptor(wakeFD)
        sem_destroy(done)
        done.deallocate()
    }

    func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: libdbus's watches of the socket

    /// The socket's watches, as libdbus hands them out
    /// (`dbus_connection_set_watch_functions`): the I/O thread polls for
    /// what they ask and hands them what poll found (`dbus_watch_handle`),
    /// so libdbus reads and writes without a poll of its own. (Its
    /// `dbus_connection_read_write` polls the socket again, with no wait:
    /// a second system call per message, which the lab's emulated CPUs
    /// charge dearly.) libdbus calls the functions below from inside its
    /// own calls, which the I/O thread alone makes, and from `connect`'s
    /// before that thread starts.
    nonisolated(unsafe) private var readWatch: OpaquePointer?
    nonisolated(unsafe) private var writeWatch: OpaquePointer?

    /// Installs the watch functions (libdbus adds its watches at once); false when libdbus is out of memory.
    func watchSocket() -> Bool {
        let add: DBusAddWatchFunction = { watch, data in
            let io = Unmanaged<LibDBusWire>.fromOpaque(data!).takeUnretainedValue()
            let flags = dbus_watch_get_flags(watch)
            if flags & DBUS_WATCH_READABLE.rawValue != 0 { io.readWatch = watch }
            if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { io.writeWatch = watch }
            return 1
        }
        let remove: DBusRemoveWatchFunction = { watch, data in
            let io = Unmanaged<LibDBusWire>.fromOpaque(data!).takeUnretainedValue()
            if io.readWatch == watch { io.readWatch = nil }
            if io.writeWatch == watch { io.writeWatch = nil }
        }
        // Whether a watch is enabled is asked at every turn (`pollEvents`).
        let toggled: DBusWatchToggledFunction = { _, _ in }
        // Unretained: the connection is closed (its watches removed) before this object goes.
        return dbus_connection_set_watch_functions(raw, add, remove, toggled, Unmanaged.passUnretained(self).toOpaque(), nil) != 0
    }

    /// What to poll the socket for: what the enabled watches ask.
    var pollEvents: Int16 {
        var events: Int16 = 0
        if let readWatch, dbus_watch_get_enabled(readWatch) != 0 { events |= Int16(POLLIN) }
        if let writeWatch, dbus_watch_get_enabled(writeWatch) != 0 { events |= Int16(POLLOUT) }
        return events
    }

    /// Hands libdbus what poll found on the socket: it reads (and queues
    /// the complete messages), writes what waits, or learns the socket's end.
    func handle(_ revents: Int16) {
        let trouble = (revents & Int16(POLLERR) != 0 ? DBUS_WATCH_ERROR.rawValue : 0)
            | (revents & Int16(POLLHUP) != 0 ? DBUS_WATCH_HANGUP.rawValue : 0)
        if let readWatch, revents & Int16(POLLIN) != 0 || trouble != 0 {
            _ = dbus_watch_handle(readWatch, (revents & Int16(POLLIN) != 0 ? DBUS_WATCH_READABLE.rawValue : 0) | trouble)
        }
        if let writeWatch, revents & Int16(POLLOUT) != 0 {
            _ = dbus_watch_handle(writeWatch, DBUS_WATCH_WRITABLE.rawValue)
        }
    }

    func ended() { sem_post(done) }

    /// Waits for the I/O thread's end (and lets the next waiter through).
    func waitForEnd() {
        while sem_wait(done) != 0 {}
        sem_post(done)
    }
}
