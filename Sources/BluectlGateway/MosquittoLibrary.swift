import BluectlDBus
import CMosquitto
#if canImport(Glibc)
import Glibc
#endif

/// libmosquitto, Eclipse Mosquitto's MQTT client library, opened when the first MQTT
/// session is made rather than by the loader at every start: with it come libssl and
/// libcrypto, 1.7 MB resident in every command (docs/benchmarks.md). The functions keep
/// libmosquitto's names, with their C types from its header (`CMosquitto`'s
/// `cmosquitto_NAME`).
struct MosquittoLibrary: Sendable {
    /// Debian 12's libmosquitto1.
    static let soname = "libmosquitto.so.1"

    /// Opening it (and `mosquitto_lib_init`), once: the library's functions, or the loader's
    /// reason. SIGPIPE is ignored from then on: libmosquitto and OpenSSL write to the socket
    /// with plain `write`, which would otherwise kill the process when the broker has reset
    /// the connection (Paho, used before, ignored it itself).
    private static let loaded = Result { () throws(DynamicLibraryError) in
        let library = try MosquittoLibrary()
        signal(SIGPIPE, SIG_IGN)
        _ = library.mosquitto_lib_init()
        return library
    }

    /// The library, or nil when it cannot be opened (`failure` says why).
    static var shared: MosquittoLibrary? { try? loaded.get() }

    /// Why `shared` is nil (the loader's words), or nil when it is not.
    static var failure: String? {
        guard case .failure(let error) = loaded else { return nil }
        return error.text
    }

    let mosquitto_lib_init: cmosquitto_mosquitto_lib_init
    let mosquitto_new: cmosquitto_mosquitto_new
    let mosquitto_destroy: cmosquitto_mosquitto_destroy
    let mosquitto_int_option: cmosquitto_mosquitto_int_option
    let mosquitto_max_inflight_messages_set: cmosquitto_mosquitto_max_inflight_messages_set
    let mosquitto_will_set: cmosquitto_mosquitto_will_set
    let mosquitto_username_pw_set: cmosquitto_mosquitto_username_pw_set
    let mosquitto_tls_set: cmosquitto_mosquitto_tls_set
    let mosquitto_tls_opts_set: cmosquitto_mosquitto_tls_opts_set
    let mosquitto_tls_insecure_set: cmosquitto_mosquitto_tls_insecure_set
    let mosquitto_connect_async: cmosquitto_mosquitto_connect_async
    let mosquitto_disconnect: cmosquitto_mosquitto_disconnect
    let mosquitto_publish: cmosquitto_mosquitto_publish
    let mosquitto_subscribe: cmosquitto_mosquitto_subscribe
    let mosquitto_loop: cmosquitto_mosquitto_loop
    let mosquitto_socket: cmosquitto_mosquitto_socket
    let mosquitto_user_data_set: cmosquitto_mosquitto_user_data_set
    let mosquitto_connect_with_flags_callback_set: cmosquitto_mosquitto_connect_with_flags_callback_set
    let mosquitto_disconnect_callback_set: cmosquitto_mosquitto_disconnect_callback_set
    let mosquitto_publish_callback_set: cmosquitto_mosquitto_publish_callback_set
    let mosquitto_message_callback_set: cmosquitto_mosquitto_message_callback_set
    let mosquitto_log_callback_set: cmosquitto_mosquitto_log_callback_set
    let mosquitto_strerror: cmosquitto_mosquitto_strerror
    let mosquitto_connack_string: cmosquitto_mosquitto_connack_string

    private init() throws(DynamicLibraryError) {
        let library = try DynamicLibrary(Self.soname)
        mosquitto_lib_init = try library.function("mosquitto_lib_init", as: cmosquitto_mosquitto_lib_init.self)
        mosquitto_new = try library.function("mosquitto_new", as: cmosquitto_mosquitto_new.self)
        mosquitto_destroy = try library.function("mosquitto_destroy", as: cmosquitto_mosquitto_destroy.self)
        mosquitto_int_option = try library.function("mosquitto_int_option", as: cmosquitto_mosquitto_int_option.self)
        mosquitto_max_inflight_messages_set = try library.function("mosquitto_max_inflight_messages_set",
                                                                   as: cmosquitto_mosquitto_max_inflight_messages_set.self)
        mosquitto_will_set = try library.function("mosquitto_will_set", as: cmosquitto_mosquitto_will_set.self)
        mosquitto_username_pw_set = try library.function("mosquitto_username_pw_set", as: cmosquitto_mosquitto_username_pw_set.self)
        mosquitto_tls_set = try library.function("mosquitto_tls_set", as: cmosquitto_mosquitto_tls_set.self)
        mosquitto_tls_opts_set = try library.function("mosquitto_tls_opts_set", as: cmosquitto_mosquitto_tls_opts_set.self)
        mosquitto_tls_insecure_set = try library.function("mosquitto_tls_insecure_set", as: cmosquitto_mosquitto_tls_insecure_set.self)
        mosquitto_connect_async = try library.function("mosquitto_connect_async", as: cmosquitto_mosquitto_connect_async.self)
        mosquitto_disconnect = try library.function("mosquitto_disconnect", as: cmosquitto_mosquitto_disconnect.self)
        mosquitto_publish = try library.function("mosquitto_publish", as: cmosquitto_mosquitto_publish.self)
        mosquitto_subscribe = try library.function("mosquitto_subscribe", as: cmosquitto_mosquitto_subscribe.self)
        mosquitto_loop = try library.function("mosquitto_loop", as: cmosquitto_mosquitto_loop.self)
        mosquitto_socket = try library.function("mosquitto_socket", as: cmosquitto_mosquitto_socket.self)
        mosquitto_user_data_set = try library.function("mosquitto_user_data_set", as: cmosquitto_mosquitto_user_data_set.self)
        mosquitto_connect_with_flags_callback_set = try library.function(
            "mosquitto_connect_with_flags_callback_set", as: cmosquitto_mosquitto_connect_with_flags_callback_set.self)
        mosquitto_disconnect_callback_set = try library.function("mosquitto_disconnect_callback_set",
                                                                 as: cmosquitto_mosquitto_disconnect_callback_set.self)
        mosquitto_publish_callback_set = try library.function("mosquitto_publish_callback_set",
                                                              as: cmosquitto_mosquitto_publish_callback_set.self)
        mosquitto_message_callback_set = try library.function("mosquitto_message_callback_set",
                                                              as: cmosquitto_mosquitto_message_callback_set.self)
        mosquitto_log_callback_set = try library.function("mosquitto_log_callback_set", as: cmosquitto_mosquitto_log_callback_set.self)
        mosquitto_strerror = try library.function("mosquitto_strerror", as: cmosquitto_mosquitto_strerror.self)
        mosquitto_connack_string = try library.function("mosquitto_connack_string", as: cmosquitto_mosquitto_connack_string.self)
    }
}
