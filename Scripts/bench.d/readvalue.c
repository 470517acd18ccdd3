/* The floor for a one-shot read (Scripts/bench lab): the least a client can
 * do with libdbus to read a GATT characteristic through bluetoothd.
 * Connect to the system bus, one blocking GattCharacteristic1.ReadValue({})
 * on a known object path, print the value as hex, exit.
 *
 *   cc -O2 -o readvalue readvalue.c $(pkg-config --cflags --libs dbus-1)
 *   readvalue /org/bluez/hci1/dev_00_AA_01_00_00_00/service0010/char0011
 */
#include <dbus/dbus.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: readvalue CHARACTERISTIC-PATH\n"); return 64; }
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *bus = dbus_bus_get_private(DBUS_BUS_SYSTEM, &err);
    if (!bus) { fprintf(stderr, "readvalue: %s\n", err.message); return 69; }
    DBusMessage *call = dbus_message_new_method_call("org.bluez", argv[1], "org.bluez.GattCharacteristic1", "ReadValue");
    DBusMessageIter it, dict;
    dbus_message_iter_init_append(call, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    dbus_message_iter_close_container(&it, &dict);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, call, 30000, &err);
    if (!reply) { fprintf(stderr, "readvalue: %s: %s\n", err.name, err.message); return 1; }
    DBusMessageIter r, arr;
    if (!dbus_message_iter_init(reply, &r) || dbus_message_iter_get_arg_type(&r) != DBUS_TYPE_ARRAY) {
        fprintf(stderr, "readvalue: unexpected reply\n");
        return 1;
    }
    dbus_message_iter_recurse(&r, &arr);
    const unsigned char *bytes = NULL;
    int n = 0;
    dbus_message_iter_get_fixed_array(&arr, &bytes, &n);
    for (int i = 0; i < n; i++) printf("%02x", bytes[i]);
    putchar('\n');
    fflush(stdout);
    return 0;
}
