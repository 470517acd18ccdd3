import BluectlDBus

// Notifications: the public entry points. The sessions themselves are
// NotifyEngine's (NotifyEngine.swift), shared by subscribers through
// NotifyShare (NotificationSharing.swift).
extension Peripheral {
    /// StartNotify on `characteristic`; the session's `values` carry every
    /// notification or indication until `stop()`, or fail when the device
    /// disconnects. The value listener is in place before StartNotify
    /// (pitfall 4). While notifying, a ReadValue of the same characteristic
    /// also shows up as a value (BlueZ emits the same signal: pitfall 6).
    ///
    /// With `onValue`, each value is handed to it instead, on the thread it
    /// arrives on (the central's event loop), and `values` only ends or
    /// fails: no hand-over to another thread per value. `onValue` must be
    /// quick and must not block: the loop (every call, signal and timer of
    /// the central) waits for it. The library's synchronous getters run at
    /// once when called from it; a lock it takes must not be held elsewhere
    /// around a call into the library.
    ///
    /// Subscribers in this process share one session per characteristic (see
    /// `NotificationSession`): the first starts it, the last to leave ends it.
    ///
    /// When another client already has a StartNotify session on the
    /// characteristic, this one shares it instead of adding a second
    /// (bluetoothd would then send every value twice): `sharing` is then
    /// `.joined`, and `onSharing` hears `.tookOver` if that client's session
    /// ends and this one starts its own (values sent in between are lost).
    public func subscribe(to characteristic: GattCharacteristic,
                          onValue: NotificationSession.ValueSink? = nil,
                          onSharing: NotificationSession.SharingSink? = nil) async throws -> NotificationSession {
        try await subscribeShared(characteristic, acquire: false, onValue: onValue, onSharing: onSharing) { [self] in
            try await NotifyEngine.start(peripheral: self, characteristic: characteristic, onValue: $0, onSharing: $1)
        }
    }

    /// `AcquireNotify`: BlueZ hands over a socket and writes each value to
    /// it, instead of one PropertiesChanged signal per value — fewer
    /// messages and wake-ups. The price (docs/bluez-pitfalls.md, 7;
    /// measured in the lab): bluetoothd drops values silently while the socket is full or
    /// not yet ready. The central's event loop watches the socket in the same
    /// poll as the bus and drains it as soon as it is readable; a loop kept
    /// busy (a slow `onValue`, a burst of signals) widens that window, and
    /// only a sequence check in the values themselves can show a loss.
    /// `onValue`: as for `subscribe(to:onValue:)`, on the loop.
    public func acquireNotifications(for characteristic: GattCharacteristic,
                                     onValue: NotificationSession.ValueSink? = nil) async throws -> NotificationSession {
        try await subscribeShared(characteristic, acquire: true, onValue: onValue, onSharing: nil) { [self] onValue, _ in
            try await NotifyEngine.acquire(peripheral: self, characteristic: characteristic, onValue: onValue)
        }
    }

    /// CoreBluetooth's `setNotifyValue(_:for:)`: turns notifications on
    /// (values through `valueUpdates(for:)`) or off.
    public func setNotifyValue(_ enabled: Bool, for characteristic: GattCharacteristic) async throws {
        let loop = central.mirror.loop
        if enabled {
            if await loop.submit({ [self] in local.value.sessions[characteristic.path] != nil }) { return }
            let session = try await subscribe(to: characteristic)
            loop.execute { [self] in local.value.sessions[characteristic.path] = session }
        } else {
            let session = await loop.submit { [self] in local.value.sessions.removeValue(forKey: characteristic.path) }
            await session?.stop()
        }
    }

    /// Whether this process has notifications on for `characteristic`
    /// (through `setNotifyValue`, `subscribe` or `acquireNotifications`).
    public func isNotifying(_ characteristic: GattCharacteristic) -> Bool {
        central.mirror.loop.sync { [self] in
            [false, true].contains { local.value.notifyShares[NotifyKey(characteristic: characteristic.path, acquire: $0)]?.isOpen == true }
        }
    }

    /// Value updates of a characteristic turned on with `setNotifyValue(true, for:)`.
    public func valueUpdates(for characteristic: GattCharacteristic) -> AsyncThrowingStream<[UInt8], any Error>? {
        central.mirror.loop.sync { [self] in local.value.sessions[characteristic.path]?.values }
    }
}
