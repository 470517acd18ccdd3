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
            io.ended()
        }
    }

    private func runLoop(_ io: LibDBusWire) {
        let busFD: Int32 = {
            var fd: Int32 = -1
            dbus_connection_get_unix_fd(io.raw, &fd)
            return fd
        }()
        while true {
            // 1. run the jobs handed in (calls to send, subscriptions, …)
            loop.runJobs()
            if stopRequested { return }
            // 2. wait for the bus, a wake-up, a watched descriptor, or the nearest timer
            let watched = loop.watched
            var fds = [
                pollfd(fd: busFD, events: Int16(POLLIN) | (dbus_connection_has_messages_to_send(io.raw) != 0 ? Int16(POLLOUT) : 0), revents: 0),
                pollfd(fd: io.wakeFD, events: Int16(POLLIN), revents: 0),
            ]
            for watch in watched { fds.append(pollfd(fd: watch.fd, events: watch.events.rawValue, revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), loop.hasJobs ? 0 : millisecondsToNextTimer())
            if ready < 0 && errno != EINTR { return }
            if fds[1].revents & Int16(POLLIN) != 0 {
                var counter: UInt64 = 0
                _ = read(io.wakeFD, &counter, 8)
            }
            // 3. move bytes both ways without blocking, then handle every complete message
            var connected = dbus_connection_read_write(io.raw, 0) != 0
            while let message = dbus_connection_pop_message(io.raw) {
                // what was handed in before this message arrived applies to it
                loop.runJobs()
                let owned = RawMessage(taking: message)
                if !handle(owned) { connected = false }
            }
            if fds[0].revents & Int16(POLLHUP | POLLERR) != 0, dbus_connection_get_is_connected(io.raw) == 0 {
                connected = false
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

    func ended() { sem_post(done) }

    /// Waits for the I/O thread's end (and lets the next waiter through).
    func waitForEnd() {
        while sem_wait(done) != 0 {}
        sem_post(done)
    }
}
