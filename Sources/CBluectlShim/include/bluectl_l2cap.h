/*
 * The kernel's socket ABI for L2CAP connection-oriented channels over LE,
 * declared here because Debian ships it only in libbluetooth-dev
 * (<bluetooth/bluetooth.h>, <bluetooth/l2cap.h>), which bluectl does not
 * otherwise need. Values and layouts as in Linux's
 * include/net/bluetooth/bluetooth.h and include/net/bluetooth/l2cap.h (the
 * same in BlueZ 5.66's lib/bluetooth.h and lib/l2cap.h); they are kernel ABI
 * and do not change. Declarations only: the socket calls are glibc's.
 */
#ifndef BLUECTL_L2CAP_H
#define BLUECTL_L2CAP_H

#include <stdint.h>
#include <sys/socket.h>

enum {
    /* socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP) */
    BLUECTL_BTPROTO_L2CAP = 0,
    /* setsockopt/getsockopt level of the options below */
    BLUECTL_SOL_BLUETOOTH = 274,
    /* struct bluectl_bt_security: the channel's (and link's) security level */
    BLUECTL_BT_SECURITY = 4,
    /* uint16_t: the MTU the peer accepts (read-only) / this side accepts */
    BLUECTL_BT_SNDMTU = 12,
    BLUECTL_BT_RCVMTU = 13,
};

/* BT_SECURITY levels: LOW needs nothing, MEDIUM an encrypted link, HIGH an
 * encrypted link whose key was made with MITM protection (authenticated). */
enum {
    BLUECTL_BT_SECURITY_LOW = 1,
    BLUECTL_BT_SECURITY_MEDIUM = 2,
    BLUECTL_BT_SECURITY_HIGH = 3,
    BLUECTL_BT_SECURITY_FIPS = 4,
};

/* sockaddr_l2.l2_bdaddr_type */
enum {
    BLUECTL_BDADDR_BREDR = 0,
    BLUECTL_BDADDR_LE_PUBLIC = 1,
    BLUECTL_BDADDR_LE_RANDOM = 2,
};

/* bdaddr_t: the address, least significant byte first. */
typedef struct {
    uint8_t b[6];
} __attribute__((packed)) bluectl_bdaddr_t;

/* struct sockaddr_l2; l2_psm and l2_cid little-endian. */
struct bluectl_sockaddr_l2 {
    sa_family_t l2_family;
    unsigned short l2_psm;
    bluectl_bdaddr_t l2_bdaddr;
    unsigned short l2_cid;
    uint8_t l2_bdaddr_type;
};

/* struct bt_security */
struct bluectl_bt_security {
    uint8_t level;
    uint8_t key_size;
};

#endif
