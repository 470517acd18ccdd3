// Paho's option structs are set up by initializer macros Swift cannot import;
// each function below returns one macro's value. No logic.
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
