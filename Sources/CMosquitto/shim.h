// The library is opened when the first MQTT session is made (BluectlGateway's
// `MosquittoLibrary`), so each function used is named here as a pointer type
// taken from its own declaration (`__typeof__`): no symbol is referenced,
// nothing can disagree. No logic.
#include <mosquitto.h>

#define CMOSQUITTO_FUNCTION(name) typedef __typeof__(&name) cmosquitto_##name;
CMOSQUITTO_FUNCTION(mosquitto_lib_init)
CMOSQUITTO_FUNCTION(mosquitto_new)
CMOSQUITTO_FUNCTION(mosquitto_destroy)
CMOSQUITTO_FUNCTION(mosquitto_int_option)
CMOSQUITTO_FUNCTION(mosquitto_max_inflight_messages_set)
CMOSQUITTO_FUNCTION(mosquitto_will_set)
CMOSQUITTO_FUNCTION(mosquitto_username_pw_set)
CMOSQUITTO_FUNCTION(mosquitto_tls_set)
CMOSQUITTO_FUNCTION(mosquitto_tls_opts_set)
CMOSQUITTO_FUNCTION(mosquitto_tls_insecure_set)
CMOSQUITTO_FUNCTION(mosquitto_connect_async)
CMOSQUITTO_FUNCTION(mosquitto_disconnect)
CMOSQUITTO_FUNCTION(mosquitto_publish)
CMOSQUITTO_FUNCTION(mosquitto_subscribe)
CMOSQUITTO_FUNCTION(mosquitto_loop)
CMOSQUITTO_FUNCTION(mosquitto_socket)
CMOSQUITTO_FUNCTION(mosquitto_user_data_set)
CMOSQUITTO_FUNCTION(mosquitto_connect_with_flags_callback_set)
CMOSQUITTO_FUNCTION(mosquitto_disconnect_callback_set)
CMOSQUITTO_FUNCTION(mosquitto_publish_callback_set)
CMOSQUITTO_FUNCTION(mosquitto_message_callback_set)
CMOSQUITTO_FUNCTION(mosquitto_log_callback_set)
CMOSQUITTO_FUNCTION(mosquitto_strerror)
CMOSQUITTO_FUNCTION(mosquitto_connack_string)
#undef CMOSQUITTO_FUNCTION
