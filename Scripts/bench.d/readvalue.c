/* The floor for a one-shot read (Scripts/bench lab): the least a client can
 * do with libdbus to read a GATT characteristic through bluetoothd.
 * Connect to the system bus, one blocking GattCharacteristic1.ReadValue({})
 * on a known object path, print the value as hex, exit. With a hex VALUE,
 * the floor for a one-shot write without response instead (issue 29's
 * throughput bench): one WriteValue(VALUE, {"type": "command"}), the value
 * printed as hex once the call returns.
 *
 *   cc -O2 -o readvalue readvalue.c $(pkg-config --cflags --libs dbus-1)
 *   readvalue /org/bluez/hci1/dev_00_AA_01_00_00_00/service0010/char0011 [VALUE]
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) { fprintf(stderr, "usage: readvalue CHARACTERISTIC-PATH [VALUE]\n"); return 64; }
    unsigned char value[512];
    int length = 0;
    for (const char *h = argc == 3 ? argv[2] : ""; h[0] && h[1] && length < (int)sizeof value; h += 2) {
        unsigned byte;
        if (sscanf(h, "%2x", &byte) != 1) { fprintf(stderr, "readvalue: bad VALUE\n"); return 64; }
        value[length++] = (unsigned char)byte;
    }
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *bus = dbus_bus_get_private(DBUS_BUS_SYSTEM, &err);
    if (!bus) { fprintf(stderr, "readvalue: %s\n", err.message); return 69; }
    DBusMessage *call = dbus_message_new_method_call("org.bluez", argv[1], "org.bluez.GattCharacteristic1",
                                                     argc == 3 ? "WriteValue" : "ReadValue");
    DBusMessageIter it, dict, entry, var;
    dbus_message_iter_init_append(call, &it);
    if (argc == 3) {
        const unsigned char *bytes = value;
        DBusMessageIter arr;
        dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "y", &arr);
        dbus_message_iter_append_fixed_array(&arr, DBUS_TYPE_BYTE, &bytes, length);
        dbus_message_iter_close_container(&it, &arr);
    }
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    if (argc == 3) {
        const char *key = "type", *type = "command";
        dbus_message_iter_open_container(&dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
        dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
        dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "s", &var);
        dbus_message_iter_append_basic(&var, DBUS_TYPE_STRING, &type);
        dbus_message_iter_close_container(&entry, &var);
        dbus_message_iter_close_container(&dict, &entry);
    }
    dbus_message_iter_close_container(&it, &dict);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, call, 30000, &err);
    if (!reply) { fprintf(stderr, "readvalue: %s: %s\n", err.name, err.message); return 1; }
    const unsigned char *bytes = value;
    int n = length;
    if (argc == 2) {
        DBusMessageIter r, arr;
        if (!dbus_message_iter_init(reply, &r) || dbus_message_iter_get_arg_type(&r) != DBUS_TYPE_ARRAY) {
            fprintf(stderr, "readvalue: unexpected reply\n");
            return 1;
        }
        dbus_message_iter_recurse(&r, &arr);
        dbus_message_iter_get_fixed_array(&arr, &bytes, &n);
    }
    for (int i = 0; i < n; i++) printf("%02x", bytes[i]);
    putchar('\n');
    fflush(stdout);
    return 0;
}
