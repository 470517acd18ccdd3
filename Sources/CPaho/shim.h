// Paho's option structs are set up by initializer macros Swift cannot import;
// each function below returns one macro's value. The library is opened when
// the first MQTT session is made (BluectlGateway's `PahoLibrary`), so each
// function used is named here as a pointer type taken from its own
// declaration (`__typeof__`): no symbol is referenced, nothing can disagree.
// No logic.
#include <MQTTAsync.h>

#define CPAHO_INITIALIZED(type, name, initializer) \
    static inline type name(void) { type value = initializer; return value; }

CPAHO_INITIALIZED(MQTTAsync_createOptions, cpaho_create_options, MQTTAsync_createOptions_initializer)
CPAHO_INITIALIZED(MQTTAsync_connectOptions, cpaho_connect_options, MQTTAsync_connectOptions_initializer)
CPAHO_INITIALIZED(MQTTAsync_willOptions, cpaho_will_options, MQTTAsync_willOptions_initializer)
CPAHO_INITIALIZED(MQTTAsync_SSLOptions, cpaho_ssl_options, MQTTAsync_SSLOptions_initializer)
CPAHO_INITIALIZED(MQTTAsync_message, cpaho_message, MQTTAsync_message_initializer)
CPAHO_INITIALIZED(MQTTAsync_responseOptions, cpaho_response_options, MQTTAsync_responseOptions_initializer)
CPAHO_INITIALIZED(MQTTAsync_disconnectOptions, cpaho_disconnect_options, MQTTAsync_disconnectOptions_initializer)

#define CPAHO_FUNCTION(name) typedef __typeof__(&name) cpaho_##name;
CPAHO_FUNCTION(MQTTAsync_global_init)
CPAHO_FUNCTION(MQTTAsync_createWithOptions)
CPAHO_FUNCTION(MQTTAsync_setCallbacks)
CPAHO_FUNCTION(MQTTAsync_setConnected)
CPAHO_FUNCTION(MQTTAsync_destroy)
CPAHO_FUNCTION(MQTTAsync_connect)
CPAHO_FUNCTION(MQTTAsync_sendMessage)
CPAHO_FUNCTION(MQTTAsync_getPendingTokens)
CPAHO_FUNCTION(MQTTAsync_free)
CPAHO_FUNCTION(MQTTAsync_freeMessage)
CPAHO_FUNCTION(MQTTAsync_subscribe)
CPAHO_FUNCTION(MQTTAsync_disconnect)
CPAHO_FUNCTION(MQTTAsync_isConnected)
CPAHO_FUNCTION(MQTTAsync_strerror)
CPAHO_FUNCTION(MQTTAsync_malloc)
#undef CPAHO_FUNCTION
