/* A minimal libdbus scanner (Scripts/bench scan): the least a client can do
 * to see advertisements through bluetoothd, as the floor beside bluectl and
 * Bleak. Adds match rules for InterfacesAdded and for Device1's
 * PropertiesChanged, calls StartDiscovery, and prints one line per device
 * added or changed: its object path and RSSI (as the Bleak peer prints its
 * address and RSSI), buffered and flushed whenever no message is waiting.
 * A line per Device1 signal, whatever it changes: in the bench's burst
 * (every update an RSSI and ManufacturerData) that is one per event.
 * Runs until a signal ends it. It keeps no state: no mirror of the devices,
 * no decoding beyond the RSSI, no JSON; what is left is libdbus reading and
 * validating each message, and its iterator.
 *
 *   cc -O2 -o scan scan.c $(pkg-config --cflags --libs dbus-1)
 *   scan /org/bluez/hci0
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <string.h>

static const char *DEVICE = "org.bluez.Device1";

/* The RSSI of an a{sv} at `dict` (an iterator on the array); 0 when absent. */
static int rssi_in(DBusMessageIter *dict) {
    DBusMessageIter entries, entry, var;
    dbus_int16_t rssi = 0;
    for (dbus_message_iter_recurse(dict, &entries); dbus_message_iter_get_arg_type(&entries) == DBUS_TYPE_DICT_ENTRY;
         dbus_message_iter_next(&entries)) {
        const char *key = NULL;
        dbus_message_iter_recurse(&entries, &entry);
        dbus_message_iter_get_basic(&entry, &key);
        if (strcmp(key, "RSSI") != 0) continue;
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &var);
        if (dbus_message_iter_get_arg_type(&var) == DBUS_TYPE_INT16) dbus_message_iter_get_basic(&var, &rssi);
        break;
    }
    return rssi;
}

/* PropertiesChanged(s iface, a{sv} changed, as invalidated) of a device. */
static void changed(DBusMessage *msg) {
    DBusMessageIter it;
    const char *iface = NULL;
    if (!dbus_message_has_signature(msg, "sa{sv}as") || !dbus_message_iter_init(msg, &it)) return;
    dbus_message_iter_get_basic(&it, &iface);
    if (strcmp(iface, DEVICE) != 0 || !dbus_message_iter_next(&it)) return;
    if (dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY) return;
    printf("%s %d\n", dbus_message_get_path(msg), rssi_in(&it));
}

/* InterfacesAdded(o path, a{sa{sv}} interfaces): a device when Device1 is among them. */
static void added(DBusMessage *msg) {
    DBusMessageIter it, ifaces, entry;
    const char *path = NULL;
    if (!dbus_message_has_signature(msg, "oa{sa{sv}}") || !dbus_message_iter_init(msg, &it)) return;
    dbus_message_iter_get_basic(&it, &path);
    if (!dbus_message_iter_next(&it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY) return;
    for (dbus_message_iter_recurse(&it, &ifaces); dbus_message_iter_get_arg_type(&ifaces) == DBUS_TYPE_DICT_ENTRY;
         dbus_message_iter_next(&ifaces)) {
        const char *name = NULL;
        dbus_message_iter_recurse(&ifaces, &entry);
        dbus_message_iter_get_basic(&entry, &name);
        if (strcmp(name, DEVICE) != 0) continue;
        dbus_message_iter_next(&entry);
        printf("%s %d\n", path, rssi_in(&entry));
        return;
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: scan ADAPTER-PATH\n");
        return 64;
    }
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *bus = dbus_bus_get_private(DBUS_BUS_SYSTEM, &err);
    if (!bus) { fprintf(stderr, "scan: %s\n", err.message); return 69; }
    dbus_bus_add_match(bus, "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.ObjectManager',"
                            "member='InterfacesAdded'", &err);
    if (!dbus_error_is_set(&err))
        dbus_bus_add_match(bus, "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',"
                                "member='PropertiesChanged',arg0='org.bluez.Device1'", &err);
    if (dbus_error_is_set(&err)) { fprintf(stderr, "scan: AddMatch: %s\n", err.message); return 69; }
    DBusMessage *m = dbus_message_new_method_call("org.bluez", argv[1], "org.bluez.Adapter1", "StartDiscovery");
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, m, 30000, &err);
    dbus_message_unref(m);
    if (!reply) { fprintf(stderr, "scan: StartDiscovery: %s: %s\n", err.name, err.message); return 69; }
    dbus_message_unref(reply);
    static char out[1 << 16];
    setvbuf(stdout, out, _IOFBF, sizeof out);
    for (;;) {
        DBusMessage *msg;
        while ((msg = dbus_connection_pop_message(bus))) {
            if (dbus_message_is_signal(msg, "org.freedesktop.DBus.Properties", "PropertiesChanged")) changed(msg);
            else if (dbus_message_is_signal(msg, "org.freedesktop.DBus.ObjectManager", "InterfacesAdded")) added(msg);
            dbus_message_unref(msg);
        }
        fflush(stdout);
        if (!dbus_connection_read_write(bus, -1)) return 0;
    }
}
