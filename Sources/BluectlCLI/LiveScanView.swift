import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// `bluectl scan` on a terminal: a table updated in place, strongest first,
/// devices ageing out. The state is this pure value; `LiveScanScreen` turns
/// it into the exact lines to show; `LiveScanTerminal` draws them. Tests
/// drive the first two with no terminal.
struct LiveScanTable: Sendable, Equatable {
    struct Row: Sendable, Equatable {
        var address: String
        var name: String?
        var rssi: Int?
        var lastSeen: Double
        var summary: String
    }

    private(set) var rows: [String: Row] = [:]
    /// Seconds without an advertisement after which a device leaves the table.
    let ageOut: Double

    init(ageOut: Double) { self.ageOut = ageOut }

    /// A discovery or an update of `device` (and its sensor reading), seen at `now` (seconds, any clock).
    mutating func update(_ device: DeviceInfo, sensor: Result<SensorReading, SensorDecodingError>? = nil, at now: Double) {
        rows[device.address.description] = Row(address: device.address.description, name: device.displayName, rssi: device.rssi,
                                   lastSeen: now, summary: Self.summary(of: device, sensor: sensor))
    }

    /// Rows still fresh at `now`, strongest first (no RSSI last), then by address.
    func visible(at now: Double) -> [Row] {
        rows.values.filter { now - $0.lastSeen <= ageOut }.sorted { a, b in
            switch (a.rssi, b.rssi) {
            case let (x?, y?) where x != y: return x > y
            case (_?, nil): return true
            case (nil, _?): return false
            default: return a.address < b.address
            }
        }
    }

    /// Forgets the devices that aged out.
    mutating func prune(at now: Double) {
        rows = rows.filter { now - $0.value.lastSeen <= ageOut }
    }

    /// What the summary column shows: the sensor's reading (or why there is none), else the
    /// beacon, else the services, else the company.
    static func summary(of device: DeviceInfo, sensor: Result<SensorReading, SensorDecodingError>? = nil) -> String {
        switch sensor {
        case .success(let reading)?: return DeviceRecord.sensorSummary(reading)
        case .failure(let error)?: return error.description
        case nil: break
        }
        if let beacon = BeaconDecoding.summary(of: device) { return beacon }
        if !device.serviceUUIDs.isEmpty { return device.serviceUUIDs.map(\.label).joined(separator: ", ") }
        if let company = device.manufacturerData.keys.min() { return "mfr " + DeviceRecord.companyLabel(company) }
        return ""
    }
}

/// The lines of the live view for a terminal `width` × `height`: a header,
/// the column titles, one row per device (as many as fit, and a line saying
/// how many did not). Each line fits `width` characters; text from the air
/// is escaped (`TextSafety.terminalSafe`) before it is measured.
enum LiveScanScreen {
    static func lines(_ table: LiveScanTable, now: Double, elapsed: Double, adapter: String,
                      width: Int, height: Int) -> [String] {
        let rows = table.visible(at: now)
        let minutes = Int(elapsed) / 60, seconds = Int(elapsed) % 60
        var out = [fit("bluectl scan on \(adapter): \(rows.count) device\(rows.count == 1 ? "" : "s"), "
                       + "\(minutes):\(seconds < 10 ? "0" : "")\(seconds) (Ctrl-C to stop)", width)]
        out.append(fit("ADDRESS            RSSI     SIGNAL SEEN  NAME                      SUMMARY", width))
        let room = max(0, height - 3)   // header, titles, and the line the cursor rests on
        let shown = rows.count > room ? max(0, room - 1) : rows.count
        for row in rows.prefix(shown) {
            let rssi = row.rssi.map { "\($0) dBm" } ?? "-"
            let seen = Int(max(0, now - row.lastSeen))
            let name = row.name.map { TextSafety.terminalSafe($0) } ?? "(no name)"
            let line = pad(row.address, 19) + pad(rssi, 9) + pad(bar(row.rssi), 7) + pad(seen == 0 ? "now" : "\(seen)s", 6)
                + pad(clip(name, 25), 26) + TextSafety.terminalSafe(row.summary)
            out.append(fit(line, width))
        }
        if shown < rows.count { out.append(fit("… and \(rows.count - shown) more (a taller terminal shows them)", width)) }
        return out
    }

    /// Five cells: one per 10 dB above -100 dBm, rounded up (-100 and weaker: none; -51 and stronger: all).
    static func bar(_ rssi: Int?) -> String {
        guard let rssi else { return "·····" }
        let filled = min(5, max(0, (rssi + 100 + 9) / 10))
        return String(repeating: "█", count: filled) + String(repeating: "·", count: 5 - filled)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// At most `width` characters, "…" marking a cut.
    static func clip(_ text: String, _ width: Int) -> String {
        text.count <= width ? text : String(text.prefix(max(0, width - 1))) + "…"
    }

    static func fit(_ line: String, _ width: Int) -> String {
        var trimmed = line
        while trimmed.last == " " { trimmed.removeLast() }
        return clip(trimmed, max(1, width))
    }
}

/// Draws `LiveScanScreen`'s lines on stdout, in place: the cursor goes back
/// up over the previous drawing, each line is rewritten and cleared to its
/// end, leftovers below are cleared. No alternate screen: when the scan ends
/// the last table stays, above the prompt. The cursor is hidden while
/// drawing and shown again by `finish()`, which also resets attributes.
struct LiveScanTerminal {
    private var drawnLines = 0
    private var drawnWidth = 0

    /// The terminal's size (80 × 24 when stdout is not one).
    static func size() -> (width: Int, height: Int) {
        var ws = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 else { return (80, 24) }
        return (Int(ws.ws_col), Int(ws.ws_row))
    }

    func start() { Self.write("\u{1B}[?25l") }

    /// `width`: the terminal's now. After a resize the terminal has re-wrapped
    /// what was drawn, so going back up by lines would miss: the screen is
    /// cleared and the table drawn from the top instead.
    mutating func draw(_ lines: [String], width: Int) {
        var text: String
        if drawnLines > 0 && width != drawnWidth {
            text = "\u{1B}[H\u{1B}[J"
        } else {
            text = drawnLines > 0 ? "\u{1B}[\(drawnLines)A\r" : ""
        }
        drawnWidth = width
        for line in lines { text += line + "\u{1B}[K\n" }
        text += "\u{1B}[J"
        drawnLines = lines.count
        Self.write(text)
    }

    func finish() { Self.write("\u{1B}[0m\u{1B}[?25h") }

    private static func write(_ text: String) {
        var text = text
        _ = text.withUTF8 { Output.writeAll(1, UnsafeRawBufferPointer($0)) }
    }
}

/// The live view's loop: the one owner of the table and the terminal.
/// Discoveries and a 250 ms tick (ages, the clock, ageing out) arrive as
/// events on one stream; the table is redrawn at most every 100 ms, so a
/// burst of advertisements does not spend its CPU on the terminal. Ends when
/// `count` devices were seen, `timeout` seconds passed (checked at every
/// event, so within a tick), the discoveries end (their error is thrown
/// after the last drawing) or the task is cancelled (Ctrl-C); the terminal
/// is restored on every way out, before the process can end.
enum LiveScanView {
    private enum Event: Sendable {
        case discovery(Discovery)
        case tick
        case ended((any Error)?)
    }

    static func run(_ discoveries: AsyncThrowingStream<Discovery, any Error>, adapter: String, count: Int?,
                    ageOut: Double, timeout: Double?) async throws {
        let (events, feed) = AsyncStream<Event>.makeStream()
        let feeder = Task {
            do {
                for try await discovery in discoveries { feed.yield(.discovery(discovery)) }
                feed.yield(.ended(nil))
            } catch {
                feed.yield(.ended(error))
            }
        }
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                feed.yield(.tick)
            }
        }
        defer {
            feeder.cancel()
            ticker.cancel()
            feed.finish()
        }
        let clock = ContinuousClock()
        let start = clock.now
        func seconds(since instant: ContinuousClock.Instant) -> Double { (clock.now - instant).seconds }
        var table = LiveScanTable(ageOut: ageOut)
        var terminal = LiveScanTerminal()
        terminal.start()
        defer { terminal.finish() }
        func draw() {
            let (width, height) = LiveScanTerminal.size()
            let now = seconds(since: start)
            terminal.draw(LiveScanScreen.lines(table, now: now, elapsed: now, adapter: adapter, width: width, height: height),
                          width: width)
        }
        draw()
        var lastDraw = clock.now
        var distinct = Set<String>()
        var failure: (any Error)?
        loop: for await event in events {
            switch event {
            case .discovery(let discovery):
                table.update(discovery.device, sensor: discovery.sensor, at: seconds(since: start))
                distinct.insert(discovery.device.address.description)
            case .tick:
                table.prune(at: seconds(since: start))
            case .ended(let error):
                failure = error
                break loop
            }
            if let count, distinct.count >= count { break }
            if let timeout, seconds(since: start) >= timeout { break }
            if clock.now - lastDraw >= .milliseconds(100) {
                draw()
                lastDraw = clock.now
            }
        }
        draw()
        if let failure { throw failure }
    }
}
