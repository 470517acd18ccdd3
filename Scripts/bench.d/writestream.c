/* The C peer of `bluectl write --stream` (issue 29's throughput bench,
 * Scripts/bench lab): the least a client can do to stream writes without
 * response through bluetoothd. One GattCharacteristic1.AcquireWrite({}) on a
 * known object path (libdbus), then stdin read 64 KiB at a time and cut into
 * values of the returned MTU less 3, at most 510 bytes (what bluetoothd 5.66
 * passes on whole: docs/bluez-pitfalls.md, 27), each one blocking send(2) on the socket
 * (bluetoothd sends every datagram as one ATT Write Command). At stdin's end
 * it waits until bluetoothd has read the socket empty (SIOCOUTQ), closes it,
 * and prints "writestream: BYTES bytes in WRITES writes" on stderr.
 *
 *   cc -O2 -o writestream writestream.c $(pkg-config --cflags --libs dbus-1)
 *   writestream /org/bluez/hci1/dev_00_AA_01_00_00_00/service0010/char0011 < data
 */
#include <dbus/dbus.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: writestream CHARACTERISTIC-PATH < data\n"); return 64; }
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *bus = dbus_bus_get_private(DBUS_BUS_SYSTEM, &err);
    if (!bus) { fprintf(stderr, "writestream: %s\n", err.message); return 69; }
    DBusMessage *call = dbus_message_new_method_call("org.bluez", argv[1], "org.bluez.GattCharacteristic1", "AcquireWrite");
    DBusMessageIter it, dict;
    dbus_message_iter_init_append(call, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    dbus_message_iter_close_container(&it, &dict);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(bus, call, 30000, &err);
    if (!reply) { fprintf(stderr, "writestream: %s: %s\n", err.name, err.message); return 1; }
    int fd = -1;
    dbus_uint16_t mtu = 0;
    if (!dbus_message_get_args(reply, &err, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_UINT16, &mtu, DBUS_TYPE_INVALID) || mtu <= 3) {
        fprintf(stderr, "writestream: unexpected reply: %s\n", err.message ? err.message : "MTU");
        return 1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);  /* blocking: a full socket holds us back */
    size_t value = mtu - 3 < 510 ? mtu - 3 : 510;
    static unsigned char buf[65536];
    long long bytes = 0, writes = 0;
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { perror("writestream: stdin"); return 74; }
        if (n == 0) break;
        for (ssize_t off = 0; off < n;) {
            size_t len = (size_t)(n - off) < value ? (size_t)(n - off) : value;
            ssize_t sent = send(fd, buf + off, len, MSG_NOSIGNAL);
            if (sent < 0 && errno == EINTR) continue;
            if (sent < 0) { perror("writestream: send"); return 1; }
            off += sent;
            bytes += sent;
            writes++;
        }
    }
    for (;;) {  /* until bluetoothd has read everything (closing earlier can lose the rest) */
        int queued = 0;
        if (ioctl(fd, SIOCOUTQ, &queued) != 0 || queued == 0) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    close(fd);
    fprintf(stderr, "writestream: %lld bytes in %lld writes\n", bytes, writes);
    return 0;
}
