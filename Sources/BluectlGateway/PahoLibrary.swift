import BluectlDBus
import CPaho

/// Eclipse Paho C's asynchronous client (`libpaho-mqtt3as`), opened when the first MQTT
/// session is made rather than by the loader at every start: with it come libssl and
/// libcrypto, 1.7 MB resident in every command (docs/benchmarks.md). The functions keep
/// Paho's names, with their C types from its header (`CPaho`'s `cpaho_NAME`).
struct PahoLibrary: Sendable {
    /// Debian 12's libpaho-mqtt1.3.
    static let soname = "libpaho-mqtt3as.so.1"

    /// Opening it, once: the library's functions, or the loader's reason.
    private static let loaded = Result { () throws(DynamicLibraryError) in try PahoLibrary() }

    /// The library, or nil when it cannot be opened (`failure` says why).
    static var shared: PahoLibrary? { try? loaded.get() }

    /// Why `shared` is nil (the loader's words), or nil when it is not.
    static var failure: String? {
        guard case .failure(let error) = loaded else { return nil }
        return error.text
    }

    let MQTTAsync_global_init: cpaho_MQTTAsync_global_init
    let MQTTAsync_createWithOptions: cpaho_MQTTAsync_createWithOptions
    let MQTTAsync_setCallbacks: cpaho_MQTTAsync_setCallbacks
    let MQTTAsync_setConnected: cpaho_MQTTAsync_setConnected
    let MQTTAsync_destroy: cpaho_MQTTAsync_destroy
    let MQTTAsync_connect: cpaho_MQTTAsync_connect
    let MQTTAsync_sendMessage: cpaho_MQTTAsync_sendMessage
    let MQTTAsync_getPendingTokens: cpaho_MQTTAsync_getPendingTokens
    let MQTTAsync_free: cpaho_MQTTAsync_free
    let MQTTAsync_freeMessage: cpaho_MQTTAsync_freeMessage
    let MQTTAsync_subscribe: cpaho_MQTTAsync_subscribe
    let MQTTAsync_disconnect: cpaho_MQTTAsync_disconnect
    let MQTTAsync_isConnected: cpaho_MQTTAsync_isConnected
    let MQTTAsync_strerror: cpaho_MQTTAsync_strerror
    let MQTTAsync_malloc: cpaho_MQTTAsync_malloc

    private init() throws(DynamicLibraryError) {
        let library = try DynamicLibrary(Self.soname)
        MQTTAsync_global_init = try library.function("MQTTAsync_global_init", as: cpaho_MQTTAsync_global_init.self)
        MQTTAsync_createWithOptions = try library.function("MQTTAsync_createWithOptions", as: cpaho_MQTTAsync_createWithOptions.self)
        MQTTAsync_setCallbacks = try library.function("MQTTAsync_setCallbacks", as: cpaho_MQTTAsync_setCallbacks.self)
        MQTTAsync_setConnected = try library.function("MQTTAsync_setConnected", as: cpaho_MQTTAsync_setConnected.self)
        MQTTAsync_destroy = try library.function("MQTTAsync_destroy", as: cpaho_MQTTAsync_destroy.self)
        MQTTAsync_connect = try library.function("MQTTAsync_connect", as: cpaho_MQTTAsync_connect.self)
        MQTTAsync_sendMessage = try library.function("MQTTAsync_sendMessage", as: cpaho_MQTTAsync_sendMessage.self)
        MQTTAsync_getPendingTokens = try library.function("MQTTAsync_getPendingTokens", as: cpaho_MQTTAsync_getPendingTokens.self)
        MQTTAsync_free = try library.function("MQTTAsync_free", as: cpaho_MQTTAsync_free.self)
        MQTTAsync_freeMessage = try library.function("MQTTAsync_freeMessage", as: cpaho_MQTTAsync_freeMessage.self)
        MQTTAsync_subscribe = try library.function("MQTTAsync_subscribe", as: cpaho_MQTTAsync_subscribe.self)
        MQTTAsync_disconnect = try library.function("MQTTAsync_disconnect", as: cpaho_MQTTAsync_disconnect.self)
        MQTTAsync_isConnected = try library.function("MQTTAsync_isConnected", as: cpaho_MQTTAsync_isConnected.self)
        MQTTAsync_strerror = try library.function("MQTTAsync_strerror", as: cpaho_MQTTAsync_strerror.self)
        MQTTAsync_malloc = try library.function("MQTTAsync_malloc", as: cpaho_MQTTAsync_malloc.self)
    }
}
