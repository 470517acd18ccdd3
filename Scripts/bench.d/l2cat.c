/* The C peer of `bluectl l2cap` for the throughput bench (Scripts/bench lab,
 * issue 29): the same work over the same kernel socket and nothing else.
 * connect: stdin to an LE L2CAP channel, read 64 KiB at a time and cut into
 * SDUs of the send MTU (as bluectl's L2CAPPump does), and at stdin's end
 * wait until the kernel has handed every byte to the controller (SO_SNDBUF
 * less TIOCOUTQ's free space, as bluectl's close does), then close.
 * listen: accept one channel, write each SDU to stdout, exit at its end.
 * Blocking calls, security low (bluectl's default, "none"). The kernel ABI
 * comes from the C shim's header (Sources/CBluectlShim/include).
 *
 *   cc -O2 -I Sources/CBluectlShim/include -o l2cat l2cat.c
 *   l2cat listen 00:AA:01:00:00:00 0x0093 > out      (bind address, PSM)
 *   l2cat connect 00:AA:01:01:00:01 00:AA:01:00:00:00 0x0093 < file
 */
#include "bluectl_l2cap.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_BLUETOOTH
#define AF_BLUETOOTH 31
#endif

static struct bluectl_sockaddr_l2 addr_of(const char *text, unsigned psm) {
    struct bluectl_sockaddr_l2 a;
    unsigned b[6];
    memset(&a, 0, sizeof a);
    if (sscanf(text, "%x:%x:%x:%x:%x:%x", &b[5], &b[4], &b[3], &b[2], &b[1], &b[0]) != 6) {
        fprintf(stderr, "l2cat: bad address %s\n", text);
        exit(64);
    }
    for (int i = 0; i < 6; i++) a.l2_bdaddr.b[i] = (uint8_t)b[i];
    a.l2_family = AF_BLUETOOTH;
    a.l2_psm = (unsigned short)psm;   /* little-endian host */
    a.l2_bdaddr_type = BLUECTL_BDADDR_LE_PUBLIC;
    return a;
}

static int bound(const char *local, unsigned psm) {
    int fd = socket(AF_BLUETOOTH, SOCK_SEQPACKET, BLUECTL_BTPROTO_L2CAP);
    struct bluectl_sockaddr_l2 a = addr_of(local, psm);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0) { perror("l2cat: socket/bind"); exit(71); }
    return fd;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

int main(int argc, char **argv) {
    static char buf[65536];
    if (argc == 4 && strcmp(argv[1], "listen") == 0) {
        int fd = bound(argv[2], (unsigned)strtoul(argv[3], NULL, 0));
        if (listen(fd, 1) < 0) { perror("l2cat: listen"); return 71; }
        fprintf(stderr, "l2cat: listening\n");
        int ch = accept(fd, NULL, NULL);
        if (ch < 0) { perror("l2cat: accept"); return 71; }
        long total = 0;
        for (;;) {
            ssize_t n = recv(ch, buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == ECONNRESET) break;   /* the peer's close, as bluectl takes it */
            if (n < 0) { perror("l2cat: recv"); return 74; }
            if (n == 0) break;
            if (write_all(1, buf, (size_t)n) < 0) { perror("l2cat: write"); return 74; }
            total += n;
        }
        fprintf(stderr, "l2cat: received %ld bytes\n", total);
        close(ch);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "connect") == 0) {
        int fd = bound(argv[2], 0);
        struct bluectl_sockaddr_l2 peer = addr_of(argv[3], (unsigned)strtoul(argv[4], NULL, 0));
        if (connect(fd, (struct sockaddr *)&peer, sizeof peer) < 0) { perror("l2cat: connect"); return 69; }
        uint16_t mtu = 0;
        socklen_t len = sizeof mtu;
        if (getsockopt(fd, BLUECTL_SOL_BLUETOOTH, BLUECTL_BT_SNDMTU, &mtu, &len) < 0 || mtu == 0) {
            perror("l2cat: BT_SNDMTU");
            return 71;
        }
        long total = 0;
        for (;;) {
            ssize_t n = read(0, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { perror("l2cat: read"); return 74; }
            if (n == 0) break;
            for (ssize_t off = 0; off < n;) {
                size_t sdu = (size_t)(n - off) < mtu ? (size_t)(n - off) : mtu;
                ssize_t k = send(fd, buf + off, sdu, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR) continue;
                if (k < 0) { perror("l2cat: send"); return 74; }
                off += k;
            }
            total += n;
        }
        /* everything handed to the controller before close(2), which drops the rest */
        for (;;) {
            int size = 0, free_space = 0;
            socklen_t l = sizeof size;
            if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &l) < 0 || ioctl(fd, TIOCOUTQ, &free_space) < 0) break;
            if (size - free_space <= 0) break;
            struct timespec ms = {0, 5000000};   /* bluectl's flush polls every 5 ms too */
            nanosleep(&ms, NULL);
        }
        fprintf(stderr, "l2cat: sent %ld bytes (send MTU %u)\n", total, mtu);
        close(fd);
        return 0;
    }
    fprintf(stderr, "usage: l2cat listen LOCAL-ADDRESS PSM | l2cat connect LOCAL-ADDRESS PEER-ADDRESS PSM\n");
    return 64;
}
