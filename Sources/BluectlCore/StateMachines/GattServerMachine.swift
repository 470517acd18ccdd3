/// The GATT server's attributes and the calls bluetoothd makes on them:
/// values, who answers a read or a write, subscriptions, and the requests
/// still waiting for the application's answer. Pure: `PeripheralManager`
/// turns bluetoothd's method calls and the application's answers into
/// events on the loop and carries out the actions (replies, signals,
/// deadlines, events for the application). Attributes are numbered in the
/// order they were added; requests by the manager.
package struct GattServerMachine: StateMachine, Equatable {
    package typealias RequestID = UInt64

    package struct Attribute: Sendable, Equatable {
        package var flags: Set<GattFlag>
        package var value: [UInt8]
        /// Reads answered from `value`, writes stored in it, by the machine.
        package var automatic: Bool
        package var isDescriptor: Bool
        package var notifying = false

        package init(flags: Set<GattFlag>, value: [UInt8], automatic: Bool, isDescriptor: Bool) {
            self.flags = flags
            self.value = value
            self.automatic = automatic
            self.isDescriptor = isDescriptor
        }
    }

    package enum State: Sendable, Equatable {
        case serving
        case stopped
    }

    package enum Event: Sendable, Equatable {
        /// Attributes to serve (a service's characteristics and descriptors), numbered from `first`.
        case add(first: Int, [Attribute])
        case remove([Int])
        /// bluetoothd's ReadValue.
        case read(RequestID, attribute: Int, offset: Int)
        /// bluetoothd's WriteValue (`expectsReply` false: the call asked for no reply).
        case write(RequestID, attribute: Int, offset: Int, value: [UInt8], expectsReply: Bool)
        case startNotify(RequestID, attribute: Int)
        case stopNotify(RequestID, attribute: Int)
        /// An indication was confirmed by a central.
        case confirm(attribute: Int)
        /// The application's answer to a request.
        case answer(RequestID, Result<[UInt8], ATTError>)
        /// A request's deadline passed.
        case deadline(RequestID)
        /// A new value from the application: stored, and sent to subscribers.
        case update(attribute: Int, value: [UInt8])
        case stop
    }

    package enum Report: Sendable, Equatable {
        /// A read or write arrived; `answered` when the machine answered it from the value.
        case request(RequestID, answered: Bool)
        case subscribed(attribute: Int)
        case unsubscribed(attribute: Int)
        case confirmed(attribute: Int)
        /// Nobody answered the request in time; bluetoothd was told it failed.
        case expired(RequestID)
    }

    package enum Action: Sendable, Equatable {
        /// Reply to a ReadValue with these bytes.
        case replyValue(RequestID, [UInt8])
        /// Reply to a WriteValue, StartNotify or StopNotify: done.
        case replyDone(RequestID)
        /// Reply with the D-Bus error bluetoothd turns into this ATT error.
        case replyError(RequestID, ATTError, String)
        /// Forget a request that asked for no reply (a write command).
        case forget(RequestID)
        case startDeadline(RequestID)
        case cancelDeadline(RequestID)
        /// PropertiesChanged(Value) on the characteristic: bluetoothd notifies or indicates its subscribers.
        case emitValue(attribute: Int, [UInt8])
        /// PropertiesChanged(Notifying).
        case emitNotifying(attribute: Int, Bool)
        case report(Report)
        case unplanned(String)
    }

    package private(set) var state: State = .serving
    package private(set) var attributes: [Int: Attribute] = [:]
    /// Requests the application has not answered yet, and the attribute each is about.
    package private(set) var pending: [RequestID: (attribute: Int, isRead: Bool)] = [:]

    package init() {}

    package var isFinished: Bool { state == .stopped }

    /// Values are not traced one by one.
    package static func traces(_ event: Event) -> Bool {
        switch event {
        case .update, .read, .write, .answer, .confirm: return false
        default: return true
        }
    }

    package static func == (a: GattServerMachine, b: GattServerMachine) -> Bool {
        a.state == b.state && a.attributes == b.attributes && a.pending.mapValues { "\($0)" } == b.pending.mapValues { "\($0)" }
    }

    /// Whether `request` still waits for the application's answer.
    package func isPending(_ request: RequestID) -> Bool { pending[request] != nil }

    package mutating func handle(_ event: Event) -> [Action] {
        if state == .stopped {
            switch event {
            case .read(let id, _, _), .startNotify(let id, _), .stopNotify(let id, _):
                return [.replyError(id, .failed, "the server is stopping")]
            case .write(let id, _, _, _, let expectsReply):
                return [expectsReply ? .replyError(id, .failed, "the server is stopping") : .forget(id)]
            default:
                return []
            }
        }
        switch event {
        case .add(let first, let added):
            for (offset, attribute) in added.enumerated() { attributes[first + offset] = attribute }
            return []

        case .remove(let numbers):
            var actions: [Action] = []
            for number in numbers {
                attributes[number] = nil
                for (id, request) in pending where request.attribute == number {
                    pending[id] = nil
                    actions += [.cancelDeadline(id), .replyError(id, .failed, "the service was removed")]
                }
            }
            return actions

        case .read(let id, let number, let offset):
            guard let attribute = attributes[number] else { return [.replyError(id, .failed, "no such attribute")] }
            guard attribute.automatic else {
                pending[id] = (number, true)
                return [.startDeadline(id), .report(.request(id, answered: false))]
            }
            guard offset <= attribute.value.count else {
                return [.replyError(id, .invalidOffset, "offset \(offset) beyond the value's \(attribute.value.count) bytes"),
                        .report(.request(id, answered: true))]
            }
            return [.replyValue(id, Array(attribute.value[offset...])), .report(.request(id, answered: true))]

        case .write(let id, let number, let offset, let value, let expectsReply):
            guard var attribute = attributes[number] else {
                return [expectsReply ? .replyError(id, .failed, "no such attribute") : .forget(id)]
            }
            guard attribute.automatic else {
                pending[id] = (number, false)
                return [.startDeadline(id), .report(.request(id, answered: !expectsReply))]
            }
            let failure: (ATTError, String)?
            if offset > attribute.value.count {
                failure = (.invalidOffset, "offset \(offset) beyond the value's \(attribute.value.count) bytes")
            } else if offset + value.count > MutableService.maximumValueLength {
                failure = (.invalidValueLength, "\(offset + value.count) bytes, longer than ATT's \(MutableService.maximumValueLength)")
            } else {
                failure = nil
            }
            if let (error, why) = failure {
                return [expectsReply ? .replyError(id, error, why) : .forget(id), .report(.request(id, answered: true))]
            }
            attribute.value = Array(attribute.value.prefix(offset)) + value
            attributes[number] = attribute
            return [expectsReply ? .replyDone(id) : .forget(id), .report(.request(id, answered: true))]

        case .startNotify(let id, let number):
            guard var attribute = attributes[number], !attribute.isDescriptor else { return [.replyError(id, .failed, "no such characteristic")] }
            guard GattFlag.allowsSubscribe(attribute.flags) else {
                return [.replyError(id, .notSupported, "the characteristic has neither notify nor indicate")]
            }
            // 5.66 calls StartNotify for each central that subscribes, StopNotify only after the last (`BlueZ566`)
            guard !attribute.notifying else { return [.replyDone(id), .report(.subscribed(attribute: number))] }
            attribute.notifying = true
            attributes[number] = attribute
            return [.replyDone(id), .emitNotifying(attribute: number, true), .report(.subscribed(attribute: number))]

        case .stopNotify(let id, let number):
            guard var attribute = attributes[number], !attribute.isDescriptor else { return [.replyError(id, .failed, "no such characteristic")] }
            guard attribute.notifying else { return [.replyDone(id)] }
            attribute.notifying = false
            attributes[number] = attribute
            return [.replyDone(id), .emitNotifying(attribute: number, false), .report(.unsubscribed(attribute: number))]

        case .confirm(let number):
            return attributes[number] == nil ? [] : [.report(.confirmed(attribute: number))]

        case .answer(let id, let result):
            guard let request = pending.removeValue(forKey: id) else { return [] }
            switch result {
            case .success(let bytes):
                // a write accepted: the application keeps what it wants (updateValue)
                return [.cancelDeadline(id), request.isRead ? .replyValue(id, bytes) : .replyDone(id)]
            case .failure(let error):
                return [.cancelDeadline(id), .replyError(id, error, "refused by the application")]
            }

        case .deadline(let id):
            guard pending.removeValue(forKey: id) != nil else { return [] }
            return [.replyError(id, .failed, "the application did not answer in time"), .report(.expired(id))]

        case .update(let number, let value):
            guard var attribute = attributes[number] else { return [.unplanned("update of a removed attribute \(number)")] }
            attribute.value = value
            attributes[number] = attribute
            return attribute.notifying ? [.emitValue(attribute: number, value)] : []

        case .stop:
            state = .stopped
            var actions: [Action] = []
            for id in pending.keys.sorted() {
                actions += [.cancelDeadline(id), .replyError(id, .failed, "the server is stopping")]
            }
            pending = [:]
            for number in attributes.keys.sorted() where attributes[number]!.notifying {
                attributes[number]!.notifying = false
                actions.append(.emitNotifying(attribute: number, false))
            }
            return actions
        }
    }
}
