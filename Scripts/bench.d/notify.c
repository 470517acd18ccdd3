/* A minimal libdbus notification consumer (Scripts/bench lab): the least a
 * client can do to receive notifications through bluetoothd's StartNotify.
 * Adds a match rule for PropertiesChanged of one characteristic, calls
 * StartNotify, prints every Value as one hex line (flushed), and after N
 * values calls StopNotify and exits. With "acquire" the same through
 * AcquireNotify instead: one read(2) of the returned socket per value, and
 * closing it ends the subscription (issue 29's throughput bench).
 *
 *   cc -O2 -o notify notify.c $(pkg-config --cflags --libs dbus-1)
 *   notify /org/bluez/hci1/dev_00_AA_01_00_00_00/service0020/char0021 3000 [acquire]
 */
#include <dbus/dbus.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

static const char *CHR = "org.bluez.GattCharacteristic1";

static int call(DBusConnection *bus, const char *path, const char *method) {
    DBusError err;
    dbus_error_init(&err);
    DBusMessage *m = dbus_message_new_method_call("org.bluez", path, CHR, method);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, m, 30000, &err);
    dbus_message_unref(m);
    if (!reply) { fprintf(stderr, "notify: %s: %s: %s\n", method, err.name, err.message); return -1; }
    dbus_message_unref(reply);
    return 0;
}

/* Value out of PropertiesChanged(s iface, a{sv} changed, as invalidated); 1 if found */
static int value_of(DBusMessage *msg, const unsigned char **bytes, int *n) {
    DBusMessageIter it, dict, entry, var, arr;
    const char *iface = NULL;
    if (!dbus_message_iter_init(msg, &it) || dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_STRING) return 0;
    dbus_message_iter_get_basic(&it, &iface);
    if (strcmp(iface, CHR) != 0 || !dbus_message_iter_next(&it)) return 0;
    if (dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY) return 0;
    for (dbus_message_iter_recurse(&it, &dict); dbus_message_iter_get_arg_type(&dict) == DBUS_TYPE_DICT_ENTRY;
         dbus_message_iter_next(&dict)) {
        const char *key = NULL;
        dbus_message_iter_recurse(&dict, &entry);
        dbus_message_iter_get_basic(&entry, &key);
        if (strcmp(key, "Value") != 0) continue;
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &var);
        if (dbus_message_iter_get_arg_type(&var) != DBUS_TYPE_ARRAY) return 0;
        dbus_message_iter_recurse(&var, &arr);
        dbus_message_iter_get_fixed_array(&arr, bytes, n);
        return 1;
    }
    return 0;
}

/* One value as a hex line, flushed. */
static void print_value(const unsigned char *bytes, int n) {
    static char line[4096];
    int k = 0;
    for (int i = 0; i < n && k < (int)sizeof line - 3; i++) k += sprintf(line + k, "%02x", bytes[i]);
    line[k++] = '\n';
    fwrite(line, 1, k, stdout);
    fflush(stdout);
}

/* AcquireNotify({}) -> (h fd, q mtu); a value per read(2) until `want`, then close. */
static int acquired(DBusConnection *bus, const char *path, long want) {
    DBusError err;
    dbus_error_init(&err);
    DBusMessage *m = dbus_message_new_method_call("org.bluez", path, CHR, "AcquireNotify");
    DBusMessageIter it, dict;
    dbus_message_iter_init_append(m, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    dbus_message_iter_close_container(&it, &dict);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, m, 30000, &err);
    dbus_message_unref(m);
    int fd = -1;
    dbus_uint16_t mtu = 0;
    if (!reply || !dbus_message_get_args(reply, &err, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_UINT16, &mtu, DBUS_TYPE_INVALID)) {
        fprintf(stderr, "notify: AcquireNotify: %s: %s\n", err.name, err.message);
        return 1;
    }
    dbus_message_unref(reply);
    unsigned char buf[1024];
    long got = 0;
    while (got < want) {   /* bluetoothd hands out a non-blocking socket: wait on it */
        ssize_t n = read(fd, buf, mtu < sizeof buf ? mtu : sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            fd_set r;
            FD_ZERO(&r);
            FD_SET(fd, &r);
            select(fd + 1, &r, NULL, NULL, NULL);
            continue;
        }
        if (n <= 0) break;
        print_value(buf, (int)n);
        got++;
    }
    close(fd);
    return got == want ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 4 && strcmp(argv[3], "acquire") == 0)) {
        fprintf(stderr, "usage: notify CHARACTERISTIC-PATH COUNT [acquire]\n");
        return 64;
    }
    const char *path = argv[1];
    long want = strtol(argv[2], NULL, 10);
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *bus = dbus_bus_get_private(DBUS_BUS_SYSTEM, &err);
    if (!bus) { fprintf(stderr, "notify: %s\n", err.message); return 69; }
    if (argc == 4) return acquired(bus, path, want);
    char rule[512];
    snprintf(rule, sizeof rule,
             "type='signal',sender='org.bluez',path='%s',interface='org.freedesktop.DBus.Properties',"
             "member='PropertiesChanged',arg0='%s'", path, CHR);
    dbus_bus_add_match(bus, rule, &err);
    if (dbus_error_is_set(&err)) { fprintf(stderr, "notify: AddMatch: %s\n", err.message); return 1; }
    if (call(bus, path, "StartNotify") != 0) return 1;
    long got = 0;
    while (got < want && dbus_connection_read_write(bus, -1)) {
        DBusMessage *msg;
        while (got < want && (msg = dbus_connection_pop_message(bus)) != NULL) {
            const unsigned char *bytes = NULL;
            int n = 0;
            if (dbus_message_is_signal(msg, "org.freedesktop.DBus.Properties", "PropertiesChanged") &&
                value_of(msg, &bytes, &n)) {
                print_value(bytes, n);
                got++;
            }
            dbus_message_unref(msg);
        }
    }
    call(bus, path, "StopNotify");
    return got == want ? 0 : 1;
}
