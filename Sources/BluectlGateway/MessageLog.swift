import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif

/// A store of messages on disk, as one append-only file: each `put` appends a record of
/// the key and its bytes, each `remove` of a key held appends a removal, and an index in
/// memory says where each key's bytes are. Reopened, the file is read from the start and
/// its last records win. `MQTTSession` keeps two: the messages handed to the connection
/// until acknowledged, and the backlog (`Backlog`).
///
/// **Why one file, not a file per message** (as Paho's own file persistence, used before,
/// did: about 17 file-system calls per message published, a third of the gateway's CPU
/// per message in the lab, docs/benchmarks.md): a message costs two writes here (its put,
/// then its removal), and removing an absent key costs nothing. A record is in the file
/// (the page cache) before `put` returns, so a `kill -9` loses nothing accepted; nothing
/// is synced to the disk, so a power cut may.
///
/// **A torn end:** a process killed in the middle of a `put` leaves a partial record at
/// the end (that `put` had not returned: the message was not accepted). Reading stops at
/// a record that runs past the end, and the file is cut there. Any other damage is an
/// error that names the file and the offset: nothing is cut silently.
///
/// **Size:** when no key is held and the file has grown past `emptyTruncation`, it is cut
/// back to its header; when it is past `compactionFloor` and four times the bytes held,
/// the records held are written to a new file that replaces it (`rename`).
///
/// One process at a time: the file is locked (`flock`) while open.
///
/// Threads: the session's owner writes; its counts are also read elsewhere (tests), so
/// the file's state is behind one lock (`Locked`, a pthread mutex that ThreadSanitizer
/// sees).
package final class MessageLog: Sendable {
    /// The file's first bytes: its format.
    static let header = Array("BLMQLOG1".utf8)
    static let putKind: UInt8 = 0x50      // "P"
    static let removeKind: UInt8 = 0x52   // "R"
    /// kind (1), key length (2, little-endian), data length (4, little-endian).
    static let recordHeaderSize = 7
    static let emptyTruncation: Int = 256 * 1024
    static let compactionFloor: Int = 16 * 1024 * 1024

    /// Where a held key's bytes are in the file.
    struct Entry {
        var offset: Int
        var length: Int
    }

    private struct State {
        var fd: Int32
        /// Where the next record goes: the file's length.
        var end: Int
        var index: [String: Entry]
        /// The bytes of the records held (headers and keys included).
        var heldBytes: Int
        /// The length below which no rewrite is tried again (after one failed).
        var nextRewrite = 0
        /// Puts that could not be written, since the log was opened (`failedPuts`).
        var failedPuts = 0
        /// Record writes still to fail, as on a full disk (`failNextWrites`, tests).
        var injectedFailures = 0
    }

    /// The file's path.
    package let path: String
    private let state: Locked<State>

    /// Opens (or creates, owner-only) the log at `path` and reads what it holds. Throws
    /// when it cannot be opened or read, is not a message log, or is damaged other than
    /// at its end (a torn end is cut off).
    package init(path: String) throws(MQTTError) {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw MQTTError(persistence: "cannot open \(path): \(String(cString: strerror(errno)))") }
        // One writer: two gateways with one client id and broker would interleave their records.
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw MQTTError(persistence: busy ? "\(path) is in use by another process (a gateway with the same id and broker?)"
                                              : "cannot lock \(path): \(reason)")
        }
        let read: Read
        switch Self.read(fd) {
        case .success(let value): read = value
        case .failure(let failure):
            Glibc.close(fd)
            switch failure {
            case .notALog: throw MQTTError(persistence: "\(path) is not bluectl's message log")
            case .damaged(let at):
                throw MQTTError(persistence: "\(path) is damaged at byte \(at) (move it aside to start without what it holds)")
            case .unreadable(let code): throw MQTTError(persistence: "cannot read \(path): \(String(cString: strerror(code)))")
            }
        }
        if read.validEnd < Self.header.count {
            // New, or its header torn at creation: written whole.
            guard ftruncate(fd, 0) == 0, Self.header.withUnsafeBytes({ Self.writeAll(fd, [($0.baseAddress, $0.count)], at: 0) }) else {
                let reason = String(cString: strerror(errno))
                Glibc.close(fd)
                throw MQTTError(persistence: "cannot write \(path): \(reason)")
            }
        } else if read.validEnd < read.end {
            _ = ftruncate(fd, read.validEnd)   // a torn last record: its put never returned
        }
        state = Locked(State(fd: fd, end: max(read.validEnd, Self.header.count), index: read.index, heldBytes: read.heldBytes))
    }

    deinit {
        state.withLock { if $0.fd >= 0 { Glibc.close($0.fd) } }
    }

    /// Stores `buffers` (concatenated) under `key`, replacing what it held. False when the
    /// file cannot be written (then nothing changed).
    package func put(_ key: String, _ buffers: [(UnsafeRawPointer?, Int)]) -> Bool {
        let keyBytes = Array(key.utf8)
        let length = buffers.reduce(0) { $0 + $1.1 }
        guard keyBytes.count <= Int(UInt16.max), length <= Int(UInt32.max) else { return false }
        return state.withLock { state in
            guard Self.write(&state, Self.putKind, keyBytes, buffers) else {
                state.failedPuts += 1
                return false
            }
            let size = Self.recordHeaderSize + keyBytes.count + length
            if let old = state.index[key] { state.heldBytes -= Self.recordSize(key, old.length) }
            state.index[key] = Entry(offset: state.end + Self.recordHeaderSize + keyBytes.count, length: length)
            state.heldBytes += size
            state.end += size
            Self.compactIfDue(&state, path: path)
            return true
        }
    }

    /// The bytes held under `key`, or nil.
    package func get(_ key: String) -> [UInt8]? {
        state.withLock { state in
            guard let entry = state.index[key] else { return nil }
            var bytes = [UInt8](repeating: 0, count: entry.length)
            let ok = bytes.withUnsafeMutableBytes { Self.readAll(state.fd, $0, at: entry.offset) }
            return ok ? bytes : nil
        }
    }

    /// Removes `key`: a removal record when it was held, nothing when it was not. False
    /// when the removal cannot be written.
    package func remove(_ key: String) -> Bool {
        state.withLock { state in
            guard let entry = state.index[key] else { return true }
            let keyBytes = Array(key.utf8)
            guard Self.write(&state, Self.removeKind, keyBytes, []) else { return false }
            state.end += Self.recordHeaderSize + keyBytes.count
            state.index[key] = nil
            state.heldBytes -= Self.recordSize(key, entry.length)
            Self.compactIfDue(&state, path: path)
            return true
        }
    }

    /// The keys held.
    package var keys: [String] { state.withLock { Array($0.index.keys) } }

    /// How many keys are held.
    package var count: Int { state.withLock { $0.index.count } }

    /// Whether `key` is held.
    package func contains(_ key: String) -> Bool { state.withLock { $0.index[key] != nil } }

    /// Removes every key (the file cut back to its header).
    package func clear() -> Bool {
        state.withLock { state in
            state.index = [:]
            state.heldBytes = 0
            state.end = Self.header.count
            return ftruncate(state.fd, state.end) == 0
        }
    }

    /// The file's length (for tests and figures).
    package var fileSize: Int { state.withLock { $0.end } }

    /// What the log at `path` holds, key by key, read without changing it (another process
    /// may be writing it: a record not yet whole is left out). Nil when it cannot be read.
    package static func contents(at path: String) -> [String: [UInt8]]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        guard case .success(let read) = read(fd) else { return nil }
        var contents: [String: [UInt8]] = [:]
        for (key, entry) in read.index {
            var bytes = [UInt8](repeating: 0, count: entry.length)
            guard bytes.withUnsafeMutableBytes({ readAll(fd, $0, at: entry.offset) }) else { return nil }
            contents[key] = bytes
        }
        return contents
    }

    /// Takes in the messages Paho's own file persistence left in `folder` (a file per key,
    /// `KEY.msg`: an earlier bluectl's), then removes those files and the folders up to
    /// `root` that are left empty. Returns how many it took; a file it cannot store stays.
    package func adopt(pahoFolder folder: String, upTo root: String) -> Int {
        guard let dir = opendir(folder) else { return 0 }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".msg") { names.append(name) }
        }
        closedir(dir)
        var taken = 0
        for name in names {
            let file = folder + "/" + name
            guard let bytes = Self.contentsOfFile(file),
                  bytes.withUnsafeBytes({ put(String(name.dropLast(4)), [($0.baseAddress, $0.count)]) }) else { continue }
            unlink(file)
            taken += 1
        }
        var folder = folder
        while folder.count > root.count, folder.hasPrefix(root), rmdir(folder) == 0 {
            folder = String(folder[..<(folder.lastIndex(of: "/") ?? folder.startIndex)])
            while folder.hasSuffix("/") { folder.removeLast() }
        }
        return taken
    }

    private static func contentsOfFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        return bytes.isEmpty || bytes.withUnsafeMutableBytes({ readAll(fd, $0, at: 0) }) ? bytes : nil
    }

    // MARK: - The file

    /// Puts that could not be written since the log was opened.
    package var failedPuts: Int { state.withLock { $0.failedPuts } }

    /// For tests: the next `count` record writes (puts and removals) fail as on a full
    /// disk, nothing written.
    package func failNextWrites(_ count: Int) { state.withLock { $0.injectedFailures = count } }

    /// Appends one record at the end; on a failure the file is cut back to where it was.
    private static func write(_ state: inout State, _ kind: UInt8, _ key: [UInt8], _ data: [(UnsafeRawPointer?, Int)]) -> Bool {
        if state.injectedFailures > 0 {
            state.injectedFailures -= 1
            return false
        }
        guard writeRecord(state.fd, kind, key, data, at: state.end) else {
            _ = ftruncate(state.fd, state.end)
            return false
        }
        return true
    }

    /// Writes one record at `offset`: its header and key, then `data` (one `pwritev`).
    private static func writeRecord(_ fd: Int32, _ kind: UInt8, _ key: [UInt8], _ data: [(UnsafeRawPointer?, Int)],
                                    at offset: Int) -> Bool {
        let k = UInt16(key.count), d = UInt32(data.reduce(0) { $0 + $1.1 })
        let head = [kind, UInt8(k & 0xff), UInt8(k >> 8),
                    UInt8(d & 0xff), UInt8((d >> 8) & 0xff), UInt8((d >> 16) & 0xff), UInt8(d >> 24)] + key
        return head.withUnsafeBytes { writeAll(fd, [($0.baseAddress, $0.count)] + data, at: offset) }
    }

    private static func recordSize(_ key: String, _ length: Int) -> Int {
        recordHeaderSize + key.utf8.count + length
    }

    /// What reading a log from its start gave: the index its records leave, where its last
    /// whole record ends, the file's length and the bytes held.
    struct Read {
        var index: [String: Entry] = [:]
        var validEnd = 0
        var end = 0
        var heldBytes = 0
    }

    /// Why a file could not be read as a log.
    enum ReadFailure: Error {
        /// It does not start with `header`.
        case notALog
        /// A record that is whole but not one the log writes, at this offset: not a torn end.
        case damaged(at: Int)
        /// The system refused a read (errno).
        case unreadable(Int32)
    }

    /// The records of `fd` from its start. A record that runs past the end (a `put` torn
    /// by a kill) ends the reading there; anything else unexpected is a failure, never
    /// cut silently. A file shorter than the header and holding its first bytes (a
    /// header torn at creation) reads as empty.
    static func read(_ fd: Int32) -> Result<Read, ReadFailure> {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failure(.unreadable(errno)) }
        var read = Read(end: info.st_size)
        var magic = [UInt8](repeating: 0, count: min(read.end, header.count))
        guard magic.withUnsafeMutableBytes({ readAll(fd, $0, at: 0) }) else { return .failure(.unreadable(errno)) }
        guard magic == Array(header.prefix(magic.count)) else { return .failure(.notALog) }
        guard read.end >= header.count else { return .success(read) }
        var at = header.count
        var head = [UInt8](repeating: 0, count: recordHeaderSize)
        while at + recordHeaderSize <= read.end {
            guard head.withUnsafeMutableBytes({ readAll(fd, $0, at: at) }) else { return .failure(.unreadable(errno)) }
            let kind = head[0]
            let keyLength = Int(head[1]) | Int(head[2]) << 8
            let dataLength = Int(head[3]) | Int(head[4]) << 8 | Int(head[5]) << 16 | Int(head[6]) << 24
            let size = recordHeaderSize + keyLength + dataLength
            guard at + size <= read.end else { break }
            guard kind == putKind || (kind == removeKind && dataLength == 0) else { return .failure(.damaged(at: at)) }
            var keyBytes = [UInt8](repeating: 0, count: keyLength)
            guard keyBytes.withUnsafeMutableBytes({ readAll(fd, $0, at: at + recordHeaderSize) }) else {
                return .failure(.unreadable(errno))
            }
            let key = String(decoding: keyBytes, as: UTF8.self)
            if let old = read.index[key] { read.heldBytes -= recordSize(key, old.length) }
            if kind == putKind {
                read.index[key] = Entry(offset: at + recordHeaderSize + keyLength, length: dataLength)
                read.heldBytes += size
            } else {
                read.index[key] = nil
            }
            at += size
        }
        read.validEnd = at
        return .success(read)
    }

    /// Cuts the file back when it holds nothing, or rewrites it with only what it holds
    /// when that is a quarter of it or less (and it is large). A failed rewrite leaves the
    /// file as it was.
    private static func compactIfDue(_ state: inout State, path: String) {
        let base = header.count
        if state.index.isEmpty {
            if state.end - base >= emptyTruncation, ftruncate(state.fd, base) == 0 { state.end = base }
            return
        }
        guard state.end >= max(compactionFloor, state.nextRewrite), state.heldBytes * 4 <= state.end else { return }
        let temporary = path + ".new"
        // A failed rewrite is tried again only once the file has grown by as much again.
        state.nextRewrite = state.end + compactionFloor
        let fd = open(temporary, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {   // the lock goes with the file that replaces it
            Glibc.close(fd)
            return
        }
        var index: [String: Entry] = [:]
        var at = base
        var ok = header.withUnsafeBytes { writeAll(fd, [($0.baseAddress!, $0.count)], at: 0) }
        for (key, entry) in state.index where ok {
            var bytes = [UInt8](repeating: 0, count: entry.length)
            let keyBytes = Array(key.utf8)
            ok = bytes.withUnsafeMutableBytes { readAll(state.fd, $0, at: entry.offset) }
                && bytes.withUnsafeBytes { writeRecord(fd, putKind, keyBytes, [($0.baseAddress, $0.count)], at: at) }
            index[key] = Entry(offset: at + recordHeaderSize + keyBytes.count, length: entry.length)
            at += recordHeaderSize + keyBytes.count + entry.length
        }
        // On disk before it replaces the old file: a power cut just after the rename must
        // not leave an empty or partial log in place of one that held everything.
        guard ok, fsync(fd) == 0, rename(temporary, path) == 0 else {
            Glibc.close(fd)
            unlink(temporary)
            return
        }
        Glibc.close(state.fd)
        state.fd = fd
        state.end = at
        state.index = index
    }

    /// Writes `buffers` one after another at `offset` (one `pwritev` unless the kernel
    /// takes less). A buffer of length 0 may have no address.
    private static func writeAll(_ fd: Int32, _ buffers: [(UnsafeRawPointer?, Int)], at offset: Int) -> Bool {
        var vectors = buffers.filter { $0.1 > 0 }.map { iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.0), iov_len: $0.1) }
        var at = offset
        var first = 0
        while first < vectors.count {
            let n = vectors[first...].withUnsafeBufferPointer { pwritev(fd, $0.baseAddress, Int32($0.count), at) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            at += n
            var left = n
            while first < vectors.count, left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base = vectors[first].iov_base! + left
                vectors[first].iov_len -= left
            }
        }
        return true
    }

    private static func readAll(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Bool {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, offset + done)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            done += n
        }
        return true
    }
}
