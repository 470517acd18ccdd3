import BluectlDBus

// The GATT application a `PeripheralManager` exports on its bus connection
// for bluetoothd (`GattManager1.RegisterApplication`): an ObjectManager at
// the application's root, a GattService1 object, and a GattCharacteristic1 or
// GattDescriptor1 object per attribute, whose properties are answered from
// the machine's values; and the D-Bus helpers its handlers share.

extension PeripheralManager {
    // MARK: - On the loop: exporting

    /// Exports `service`'s objects (the application's ObjectManager, the
    /// service, its characteristics and descriptors) and hands its
    /// attributes to the machine.
    func export(_ service: MutableService) -> PublishedService {
        let number = server.value.nextService
        server.value.nextService += 1
        let root = base.appending("app\(number)")!
        let servicePath = root.appending("service0")!
        var characteristics: [PublishedCharacteristic] = []
        var added: [GattServerMachine.Attribute] = []
        let first = server.value.nextAttribute
        var objects: [(ObjectPath, [String: [String: DBusValue]])] = [
            (servicePath, ["org.bluez.GattService1": [
                "UUID": .string(service.uuid.uuidString), "Primary": .boolean(service.isPrimary),
                "Includes": .array(element: .objectPath, []),
            ]]),
        ]
        for (c, definition) in service.characteristics.enumerated() {
            let path = servicePath.appending("char\(c)")!
            let attribute = first + added.count
            var descriptors: [PublishedDescriptor] = []
            let characteristic = PublishedCharacteristic(uuid: definition.uuid, serviceUUID: service.uuid, flags: definition.flags,
                                                         attribute: attribute, descriptors: [])
            added.append(.init(flags: definition.flags, value: definition.value ?? [], automatic: definition.value != nil,
                               isDescriptor: false))
            server.value.paths[path] = attribute
            var descriptorPlaces: [(PublishedDescriptor, ObjectPath)] = []
            for (d, descriptorDefinition) in definition.descriptors.enumerated() {
                let descriptorPath = path.appending("desc\(d)")!
                let descriptor = PublishedDescriptor(uuid: descriptorDefinition.uuid, flags: descriptorDefinition.flags,
                                                     attribute: first + added.count)
                added.append(.init(flags: descriptorDefinition.flags, value: descriptorDefinition.value, automatic: true,
                                   isDescriptor: true))
                server.value.paths[descriptorPath] = descriptor.attribute
                descriptors.append(descriptor)
                descriptorPlaces.append((descriptor, descriptorPath))
            }
            var withDescriptors = characteristic
            withDescriptors.descriptors = descriptors
            characteristics.append(withDescriptors)
            server.value.attributes[attribute] = ServedAttribute(path: path, characteristic: withDescriptors, descriptor: nil,
                                                                 flags: definition.flags, parent: servicePath)
            for (descriptor, descriptorPath) in descriptorPlaces {
                server.value.attributes[descriptor.attribute] = ServedAttribute(
                    path: descriptorPath, characteristic: withDescriptors, descriptor: descriptor, flags: descriptor.flags, parent: path)
            }
        }
        server.value.nextAttribute = first + added.count
        driver.send(.add(first: first, added))
        let published = PublishedService(uuid: service.uuid, isPrimary: service.isPrimary, characteristics: characteristics,
                                          number: number, root: root)
        server.value.services[number] = published
        for attribute in first..<(first + added.count) {
            objects.append((server.value.attributes[attribute]!.path, properties(of: attribute)))
        }
        let exported = objects
        for attribute in first..<(first + added.count) {
            let path = server.value.attributes[attribute]!.path
            connection.export(path) { [weak self] message, connection in
                guard let self else { return Self.refuse(message, connection) }
                handleAttributeCall(message, attribute: attribute)
            }
        }
        connection.export(servicePath) { [weak self] message, connection in
            guard self != nil else { return Self.refuse(message, connection) }
            Self.answerProperties(message, connection, exported[0].1)
        }
        connection.export(root) { [weak self] message, connection in
            guard let self else { return Self.refuse(message, connection) }
            guard message.interface == BlueZ.objectManager || message.interface == nil, message.member == "GetManagedObjects" else {
                return Self.unknownMethod(message, connection)
            }
            // the current values and notifying states, not those at export time
            let current = exported.map { path, interfaces in
                (path, server.value.paths[path].map { properties(of: $0) } ?? interfaces)
            }
            try? connection.send(.methodReturn(to: message, arguments: [Self.managedObjects(current)]))
        }
        return published
    }

    /// Unexports `service`'s objects; the machine fails the requests about it still waiting.
    func unexport(_ service: PublishedService) {
        guard server.value.services.removeValue(forKey: service.number) != nil else { return }
        var numbers: [Int] = []
        for characteristic in service.characteristics {
            numbers.append(characteristic.attribute)
            numbers += characteristic.descriptors.map(\.attribute)
        }
        driver.send(.remove(numbers))
        for number in numbers {
            if let attribute = server.value.attributes.removeValue(forKey: number) {
                server.value.paths[attribute.path] = nil
                connection.unexport(attribute.path)
            }
        }
        connection.unexport(service.root.appending("service0")!)
        connection.unexport(service.root)
    }

    /// The D-Bus properties of a served attribute now.
    func properties(of number: Int) -> [String: [String: DBusValue]] {
        guard let served = server.value.attributes[number] else { return [:] }
        let state = driver.machine.attributes[number]
        let flags = GattFlag.stringList(served.flags)
        if let descriptor = served.descriptor {
            return ["org.bluez.GattDescriptor1": [
                "UUID": .string(descriptor.uuid.uuidString), "Characteristic": .objectPath(served.parent),
                "Flags": flags, "Value": .bytes(state?.value ?? []),
            ]]
        }
        var properties: [String: DBusValue] = [
            "UUID": .string(served.characteristic.uuid.uuidString), "Service": .objectPath(served.parent), "Flags": flags,
        ]
        if GattFlag.allowsRead(served.flags) || state?.automatic == true { properties["Value"] = .bytes(state?.value ?? []) }
        if GattFlag.allowsSubscribe(served.flags) { properties["Notifying"] = .boolean(state?.notifying ?? false) }
        return ["org.bluez.GattCharacteristic1": properties]
    }

    // MARK: - D-Bus helpers

    static func options(_ value: DBusValue?) -> [String: DBusValue] {
        var options: [String: DBusValue] = [:]
        guard case .dictionary(_, _, let entries)? = value?.unwrapped else { return options }
        for entry in entries {
            if let key = entry.key.string { options[key] = entry.value.unwrapped }
        }
        return options
    }

    static func managedObjects(_ objects: [(ObjectPath, [String: [String: DBusValue]])]) -> DBusValue {
        .dictionary(key: .objectPath, value: DBusSignature("a{sa{sv}}")!, objects.map { path, interfaces in
            DBusDictEntry(.objectPath(path), .dictionary(
                key: .string, value: DBusSignature("a{sv}")!,
                interfaces.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .stringVariantDictionary($0.value)) }))
        })
    }

    /// Properties.Get / GetAll of an exported object; Set is refused (bluetoothd never sets).
    static func answerProperties(_ message: DBusMessage, _ connection: DBusConnection, _ interfaces: [String: [String: DBusValue]]) {
        guard message.interface == BlueZ.properties else { return unknownMethod(message, connection) }
        let interface = message.arguments.first?.string ?? ""
        switch message.member {
        case "GetAll":
            try? connection.send(.methodReturn(to: message, arguments: [.stringVariantDictionary(interfaces[interface] ?? [:])]))
        case "Get":
            let name = message.arguments.dropFirst().first?.string ?? ""
            if let value = interfaces[interface]?[name] {
                try? connection.send(.methodReturn(to: message, arguments: [.variant(value)]))
            } else {
                try? connection.send(.error(to: message, name: "org.freedesktop.DBus.Error.InvalidArgs", message: "no property \(name)"))
            }
        default:
            try? connection.send(.error(to: message, name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "read-only"))
        }
    }

    static func unknownMethod(_ message: DBusMessage, _ connection: DBusConnection) {
        guard !message.noReplyExpected else { return }
        try? connection.send(.error(to: message, name: "org.freedesktop.DBus.Error.UnknownMethod",
                                    message: "no method \(message.member ?? "?") on \(message.interface ?? "?")"))
    }

    static func refuse(_ message: DBusMessage, _ connection: DBusConnection) {
        guard !message.noReplyExpected else { return }
        try? connection.send(.error(to: message, name: "org.bluez.Error.Failed", message: "no longer served"))
    }
}

extension GattFlag {
    /// `as`, in declaration order.
    static func stringList(_ flags: Set<GattFlag>) -> DBusValue { .stringArray(flags.sorted().map(\.rawValue)) }
}
