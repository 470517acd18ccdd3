"""The lab service's logic (Scripts/lab.d/guest/periph.py's docstring says what
it serves), shared by its two front ends: the GATT application registered with
bluetoothd (periph.py) and the ATT server of its own (periph_att.py)."""
import struct
import time

from gi.repository import GLib

BASE = 'b1ec7100-0000-4000-8000-%012x'
SERVICE_UUID = BASE % 0
STREAM_UUID = BASE % 1
CONTROL_UUID = BASE % 2
LONG_UUID = BASE % 3
INDICATE_UUID = BASE % 4
SINK_UUID = BASE % 5

LONG_INITIAL = bytes(i & 0xff for i in range(300))
LONG_MAX = 512
BATCH = 32          # notifications emitted per main-loop turn in a burst
# Over its own ATT server a burst goes out BURST_BATCH values every
# BURST_PERIOD_MS ms (about 800/s, what the lab's bluetoothd delivers from
# hci0): unpaced, python writes 300 values into the socket in 40 ms, btvirt
# (no radio timing) forwards them as fast, and the central's bluetoothd, slower
# than that, loses the ones that overflow its ATT socket's receive buffer.
BURST_BATCH, BURST_PERIOD_MS = 4, 5



def log(*a):
    print('periph:', *a, flush=True)


class LabError(Exception):
    """A refusal of the service's logic, named as bluetoothd's D-Bus errors
    (org.bluez.Error.NAME); the ATT server maps it to an ATT error code."""
    def __init__(self, name):
        Exception.__init__(self, name)
        self.name = name


def stream_value(seq):
    return struct.pack('<I', seq & 0xffffffff) + bytes((seq + i) & 0xff for i in range(4, 20))

# ---------------------------------------------------------------- the service's logic
class Stream:
    """The sequence-numbered notification source and its control, whatever
    carries them: each value goes to every sink (a callable); `notifying` is
    true while anyone subscribed (D-Bus StartNotify, or an ATT client's CCC)."""

    def __init__(self, batch=BATCH, period_ms=0):
        self.batch, self.period_ms = batch, period_ms   # a burst: batch values per main-loop turn or per period
        self.sinks = []
        self.subscribers = set()
        self.last = bytes(20)
        self.requested = self.sent = 0
        self.source = None
        self.interval_ms = 0
        self.t0 = 0.0

    @property
    def notifying(self):
        return bool(self.subscribers)

    def subscribe(self, who):
        self.subscribers.add(who)

    def unsubscribe(self, who):
        self.subscribers.discard(who)

    def emit(self):
        self.last = stream_value(self.sent)
        for sink in list(self.sinks):
            sink(self.last)
        self.sent += 1

    def start(self, count, interval_ms):
        self.stop(quiet=True)
        self.requested, self.sent, self.interval_ms = count, 0, interval_ms
        self.t0 = time.monotonic()
        log('stream: burst of %d values, interval %d ms, notifying=%s' % (count, interval_ms, self.notifying))
        if count == 0:
            return
        if interval_ms:
            self.source = GLib.timeout_add(interval_ms, self.tick)
        elif self.period_ms:
            self.source = GLib.timeout_add(self.period_ms, self.tick)
        else:
            self.source = GLib.idle_add(self.tick)

    def tick(self):
        for _ in range(1 if self.interval_ms else self.batch):
            if self.sent >= self.requested:
                break
            self.emit()
        if self.sent >= self.requested:
            dt = time.monotonic() - self.t0
            log('stream: burst done, %d values in %.3f s (%.0f/s)' % (self.sent, dt, self.sent / dt if dt else 0))
            self.source = None
            return False
        return True

    def stop(self, quiet=False):
        if self.source is not None:
            GLib.source_remove(self.source)
            self.source = None
            if not quiet:
                log('stream: stopped after %d of %d values' % (self.sent, self.requested))

    def read(self, offset):
        return self.last[offset:]

    def control_read(self, offset):
        v = struct.pack('<IIBB', self.requested, self.sent, int(self.source is not None), int(self.notifying))
        return v[offset:]

    def control_write(self, v):
        log('control: write %s' % v.hex())
        if len(v) == 0:
            self.stop()
        elif len(v) == 4:
            self.start(struct.unpack('<I', v)[0], 0)
        elif len(v) == 8:
            self.start(*struct.unpack('<II', v))
        else:
            raise LabError('InvalidValueLength')


class Long:
    def __init__(self):
        self.value = LONG_INITIAL

    def read(self, off):
        log('long: read offset %d' % off)
        if off > len(self.value):
            raise LabError('InvalidOffset')
        return self.value[off:]

    def write(self, off, v):
        log('long: write %d bytes at offset %d' % (len(v), off))
        if off > len(self.value):
            raise LabError('InvalidOffset')
        if off + len(v) > LONG_MAX:
            raise LabError('InvalidValueLength')
        self.value = self.value[:off] + v


class Sink:
    """The sink characteristic's tally: bytes, writes and their SHA-256 since
    the last summary, the times of the first and the last write. Half a
    second after the last write it logs one line and starts again:
    `sink: BYTES bytes in WRITES writes, FIRST_BYTES first, SECONDS s first to last, sha256 HEX`."""
    IDLE = 0.5

    def __init__(self):
        self.reset()
        self.timer = None

    def reset(self):
        import hashlib
        self.bytes, self.writes, self.first_bytes, self.first, self.last = 0, 0, 0, None, None
        self.sha = hashlib.sha256()

    def write(self, v):
        now = time.monotonic()
        if self.first is None:
            self.first, self.first_bytes = now, len(v)
        self.last = now
        self.bytes += len(v)
        self.writes += 1
        self.sha.update(v)
        if self.timer is None:
            self.timer = GLib.timeout_add(100, self.check)

    def check(self):
        if time.monotonic() - self.last < self.IDLE:
            return True
        log('sink: %d bytes in %d writes, %d first, %.6f s first to last, sha256 %s' % (
            self.bytes, self.writes, self.first_bytes, self.last - self.first, self.sha.hexdigest()))
        self.reset()
        self.timer = None
        return False
