#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BluectlCore
import ESPHomeAPI

/// An answer about one attribute of one device: its `address` and `handle`
/// are set by `ProxyLinks` from the request it answers.
protocol AddressedResponse {
    var address: UInt64 { get set }
    var handle: UInt32 { get set }
}

extension BluetoothGATTReadResponse: AddressedResponse {}
extension BluetoothGATTWriteResponse: AddressedResponse {}
extension BluetoothGATTNotifyResponse: AddressedResponse {}
extension BluetoothGATTErrorResponse: AddressedResponse {}

extension ProxyLinks {
    /// "AA:BB:CC:DD:EE:FF" of an address as the API carries it (48 bits in a UInt64).
    static func describe(_ address: UInt64) -> String {
        BluetoothAddress(uint64: address)?.description ?? String(address, radix: 16)
    }

    /// A UUID as the API's `[high, low]` 64-bit halves (the 128-bit form,
    /// which every API version reads; `short_uuid` is only an abbreviation).
    static func split(_ uuid: BluetoothUUID) -> [UInt64] {
        [UInt64(truncatingIfNeeded: uuid.uint128Value >> 64), UInt64(truncatingIfNeeded: uuid.uint128Value)]
    }

    /// The descriptor with ATT handle `handle`, and its characteristic.
    static func descriptor(_ handle: UInt32, of peripheral: Peripheral) throws -> (descriptor: GattDescriptor, of: GattCharacteristic) {
        let database = peripheral.database
        for characteristic in database.characteristics {
            if let descriptor = database.descriptors(of: characteristic).first(where: { $0.handle == Int(handle) }) {
                return (descriptor, characteristic)
            }
        }
        throw BluetoothError.attributeNotFound(kind: "descriptor", what: "handle \(handle)", existing: [])
    }

    /// The error code a failed GATT request is answered with: the ATT error
    /// BlueZ reports ("ATT error: 0x0e"), else ESP-IDF's status nearest to
    /// the failure (aioesphomeapi names them: invalid handle, read or write
    /// not permitted, …), else `ESP_GATT_ERROR`.
    static func gattCode(_ error: any Error, write: Bool) -> Int32 {
        switch BluetoothError.from(error, operation: "") {
        case .attributeNotFound: return 0x01   // invalid handle
        case .notSupported, .notPermitted: return write ? 0x03 : 0x02   // write / read not permitted
        case .authenticationFailed: return 0x05   // insufficient authentication
        case .valueTooLong: return 0x0D   // invalid attribute length
        case .disconnected: return notConnected
        case .bluez(_, let message, _):
            if let range = message.firstRange(of: "ATT error: 0x"),
               let code = Int32(message[range.upperBound...].prefix(2), radix: 16) {
                return code
            }
            return gattError
        default: return gattError
        }
    }
}

extension ProxySessionMachine.DeviceRequest: CustomStringConvertible {
    /// For the debug log: what is asked, values by their length only.
    package var description: String {
        switch self {
        case .connect(let cached): "connect (\(cached ? "with" : "without") cache)"
        case .disconnect: "disconnect"
        case .pair: "pair"
        case .unpair: "unpair"
        case .clearCache: "clear cache"
        case .services: "services"
        case .read(let handle): "read handle \(handle)"
        case .write(let handle, let data, let response):
            "write handle \(handle) (\(data.count) bytes, \(response ? "with" : "without") response)"
        case .readDescriptor(let handle): "read descriptor \(handle)"
        case .writeDescriptor(let handle, let data): "write descriptor \(handle) (\(data.count) bytes)"
        case .notify(let handle, let enable): "notify handle \(handle) \(enable ? "on" : "off")"
        }
    }
}
