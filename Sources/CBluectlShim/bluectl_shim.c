#define _GNU_SOURCE /* pthread_setname_np */
#include <sys/prctl.h>
#include <pthread.h>
#include "bluectl_shim.h"

bool bluectl_valid_path(const char *path) {
    return path != NULL && dbus_validate_path(path, NULL);
}
bool bluectl_valid_interface(const char *name) {
    return name != NULL && dbus_validate_interface(name, NULL);
}
bool bluectl_valid_member(const char *name) {
    return name != NULL && dbus_validate_member(name, NULL);
}
bool bluectl_valid_error_name(const char *name) {
    return name != NULL && dbus_validate_error_name(name, NULL);
}
bool bluectl_valid_bus_name(const char *name) {
    return name != NULL && dbus_validate_bus_name(name, NULL);
}
bool bluectl_valid_utf8(const char *text) {
    return text != NULL && dbus_validate_utf8(text, NULL);
}
bool bluectl_valid_signature(const char *signature) {
    return signature != NULL && dbus_signature_validate(signature, NULL);
}

DBusMessage *bluectl_message_new_method_call(const char *destination, const char *path,
                                             const char *interface, const char *method) {
    if (destination != NULL && !bluectl_valid_bus_name(destination)) return NULL;
    if (interface != NULL && !bluectl_valid_interface(interface)) return NULL;
    if (!bluectl_valid_path(path) || !bluectl_valid_member(method)) return NULL;
    return dbus_message_new_method_call(destination, path, interface, method);
}

DBusMessage *bluectl_message_new_signal(const char *path, const char *interface,
                                        const char *name) {
    if (!bluectl_valid_path(path) || !bluectl_valid_interface(interface) ||
        !bluectl_valid_member(name)) return NULL;
    return dbus_message_new_signal(path, interface, name);
}

DBusMessage *bluectl_message_new_error(DBusMessage *reply_to, const char *error_name,
                                       const char *text) {
    if (reply_to == NULL || !bluectl_valid_error_name(error_name)) return NULL;
    if (text != NULL && !bluectl_valid_utf8(text)) return NULL;
    return dbus_message_new_error(reply_to, error_name, text);
}

int bluectl_name_this_thread(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

int bluectl_disable_transparent_huge_pages(void) {
    return prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
}
