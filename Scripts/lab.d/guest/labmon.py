#!/usr/bin/python3 -I
"""Record the kernel's Bluetooth monitor channel (what `btmon -w` records) to
a btsnoop file, without decoding anything.

btmon 5.66 decodes every packet even with -w and crashes (NULL call) on some
BlueZ-to-BlueZ ATT traffic, which truncates its trace. This only copies
frames: the file is complete. Read it with `btmon -r FILE` (Scripts/lab does,
on the host) or Wireshark.

usage: labmon.py FILE      (stops on SIGTERM/SIGINT)
"""
import ctypes
import signal
import socket
import struct
import sys
import time

AF_BLUETOOTH, BTPROTO_HCI = 31, 1
HCI_DEV_NONE, HCI_CHANNEL_MONITOR = 0xffff, 2
BTSNOOP_FORMAT_MONITOR = 2001
# btsnoop timestamps: microseconds since year 0, as in BlueZ's src/shared/btsnoop.c
EPOCH_DELTA = 0x00E03AB44A676000
Y2K = 946684800

stop = False


def on_signal(*_):
    global stop
    stop = True


def main(path):
    sock = socket.socket(AF_BLUETOOTH, socket.SOCK_RAW, BTPROTO_HCI)
    libc = ctypes.CDLL(None, use_errno=True)
    addr = ctypes.create_string_buffer(struct.pack('<HHH', AF_BLUETOOTH, HCI_DEV_NONE, HCI_CHANNEL_MONITOR))
    if libc.bind(sock.fileno(), addr, 6) != 0:
        print('labmon: bind to the monitor channel failed: errno %d' % ctypes.get_errno(), file=sys.stderr)
        return 1
    # The kernel drops monitor frames for a reader whose receive buffer is full
    # (hci_send_to_channel: sock_queue_rcv_skb fails). A notification burst is
    # thousands of frames in a second, faster than python under TCG copies
    # them: a large buffer keeps the trace complete.
    try:
        sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)   # SO_RCVBUFFORCE (root)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sock.settimeout(0.5)
    n = 0
    with open(path, 'wb') as out:
        out.write(b'btsnoop\0' + struct.pack('>II', 1, BTSNOOP_FORMAT_MONITOR))
        out.flush()
        print('labmon: recording to %s' % path, flush=True)
        while not stop:
            try:
                frame = sock.recv(65536 + 6)
            except socket.timeout:
                continue
            except InterruptedError:
                continue
            now = time.time()
            if len(frame) < 6:
                continue
            opcode, index, length = struct.unpack('<HHH', frame[:6])
            data = frame[6:6 + length]
            sec = int(now)
            ts = (sec - Y2K) * 1000000 + int((now - sec) * 1e6) + EPOCH_DELTA
            out.write(struct.pack('>IIIIq', len(data), len(data), (index << 16) | opcode, 0, ts) + data)
            out.flush()
            n += 1
    print('labmon: %d frames' % n, flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
