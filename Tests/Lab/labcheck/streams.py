"""The lab peripheral's numbered stream (periph.py's control and stream
characteristics, on either peripheral), several devices at once, and a
subscriber's output checked number by number."""
import re
import time

from . import lab
from .jsonlines import check, parse, seq_of, stream_value_ok
from .procs import read_text


def burst_hex(n):
    """uint32 LE as hex."""
    return (n & 0xffffffff).to_bytes(4, 'little').hex()


def connect_all(c, *devs):
    """Connect N devices (`bluectl connect`), each expected to exit 0."""
    for d in devs:
        c.bl('connect', d, *lab.DEV_OPTS)
        c.expect_rc(0)


def read_value(c, dev, uuid):
    """`read --json` of uuid, expected to exit 0: its value (hex)."""
    c.bl('read', dev, uuid, '--json', *lab.DEV_OPTS)
    c.expect_rc(0)
    text = c.last.stdout
    m = re.search(r'"value" *: *"([0-9a-fA-F]*)"', text)
    if '"value"' not in text:
        c.fail('read --json output has no value')
    return m.group(1) if m else ''


class StreamState:
    """The control characteristic's read: sent (values sent in the last
    burst), running, notifying (0/1)."""

    def __init__(self, v):
        b = bytes.fromhex(v)
        self.sent = int.from_bytes(b[4:8], 'little')
        self.running, self.notifying = b[8], b[9]


def stream_state(c, dev=None):
    """The stream's state (None when the control characteristic could not be read)."""
    c.bl('read', dev or lab.DEV, lab.LAB_CONTROL, '--json', *lab.DEV_OPTS)
    if c.last.rc != 0:
        return None
    m = re.search(r'"value" *: *"([0-9a-fA-F]*)"', c.last.stdout)
    if not m or len(m.group(1)) != 20:
        return None
    return StreamState(m.group(1))


def wait_stream(c, what, secs, dev=None):
    """Until the stream is 'notifying' or 'done' (a failed read is tried
    again: bluetoothd may be restarting); the last state, or None."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        s = stream_state(c, dev)
        if s and ((what == 'notifying' and s.notifying == 1) or (what == 'done' and s.running == 0)):
            return s
        time.sleep(0.3)
    return None


def stream_start(c, dev, n, ms=None):
    """The peripheral sends values 0..n-1: a burst (as fast as it goes; on
    hci2 about 800/s, see periph.py) or one every ms milliseconds."""
    c.bl('write', dev, lab.LAB_CONTROL, '0x' + burst_hex(n) + (burst_hex(ms) if ms is not None else ''),
         '--with-response', *lab.DEV_OPTS)
    c.expect_rc(0)


def stream_stop(c, dev):
    """Stop dev's stream: the number of values it sent."""
    c.bl('write', dev, lab.LAB_CONTROL, '--utf8', '', '--with-response', *lab.DEV_OPTS)   # empty: stop
    c.expect_rc(0)
    s = stream_state(c, dev)
    if s is None:
        c.fail('cannot read the stream state of %s' % dev)
    return s.sent


def seq_exact(c, path, n, kind, dev=None):
    """The file holds every sequence number 0..n-1 exactly once, in order;
    kind 'json' (bluectl --json lines) or 'hex' (one value per line); with
    dev only the json lines whose "device" is dev count."""
    seqs = []
    for line in read_text(path).splitlines():
        line = line.strip()
        if not line:
            continue
        if kind == 'json':
            l = parse(line)[0]
            if 'value' not in l or (dev and l.get('device') != dev):
                continue
            line = l['value']
        seqs.append(seq_of(line))
    missing = set(range(n)) - set(seqs)
    c.say('%s%s: %d values, %d distinct, %d duplicates, %d missing' % (
        path, ' ' + dev if dev else '', len(seqs), len(set(seqs)), len(seqs) - len(set(seqs)), len(missing)))
    check(seqs == list(range(n)), '%s%s: not every value exactly once' % (path.rsplit('/', 1)[-1], ' (%s)' % dev if dev else ''))


# ---- a subscriber of several devices: its output as it grows
def _what(what):
    return '"value"' if what == 'value' else '"event": ?"%s"' % what


def count_lines(path, dev, what):
    """Lines of path about dev with what ('value' or an event name)."""
    d, w = re.compile(r'"device": ?"%s"' % dev), re.compile(_what(what))
    return sum(1 for l in read_text(path).splitlines() if d.search(l) and w.search(l))


def wait_lines(c, path, dev, what, n, secs, proc=None):
    """Until path has n lines about dev with what; a subscriber that ended
    ends the wait. False (and a line in the log) when it did not come."""
    end = time.monotonic() + secs
    while count_lines(path, dev, what) < n:
        if proc is not None and not proc.alive():
            c.echo('the subscriber ended')
            return False
        if time.monotonic() >= end:
            c.echo('timeout: %d of %d lines %s for %s after %s s' % (count_lines(path, dev, what), n, what, dev, secs))
            return False
        time.sleep(0.3)
    return True


def wait_seq(c, path, dev, seq, secs, proc=None):
    """Until path has dev's value number seq."""
    d, v = re.compile(r'"device": ?"%s"' % dev), re.compile(r'"value": ?"%s' % burst_hex(seq))
    end = time.monotonic() + secs
    while not any(d.search(l) and v.search(l) for l in read_text(path).splitlines()):
        if proc is not None and not proc.alive():
            c.echo('the subscriber ended')
            return False
        if time.monotonic() >= end:
            c.echo('timeout: no value %d of %s after %s s' % (seq, dev, secs))
            return False
        time.sleep(0.3)
    return True


def items(lines, dev):
    """What a multi-device subscribe's output says of dev, in order:
    ('v', seq) for a stream value, ('e', line) for an event."""
    out = []
    for l in lines:
        check(isinstance(l, dict) and 'time' in l and 'device' in l, 'line without time or device: %r' % (l,))
        if l['device'] != dev:
            continue
        if 'value' in l:
            check(l.get('characteristic') == lab.LAB_STREAM, 'characteristic %r' % l.get('characteristic'))
            check(stream_value_ok(l['value']), 'corrupt value %s' % l['value'])
            out.append(('v', seq_of(l['value'])))
        else:
            check('event' in l, 'line neither value nor event: %r' % l)
            out.append(('e', l))
    return out


def verify(c, lines, dev, first=0, last=None):
    """dev's sequence numbers only rise (no duplicate, none out of order),
    each jump (numbers missing) follows a reported reconnect or gap since the
    value before, disconnected and reconnected alternate; (numbers, events)."""
    seqs, events, since, prev = [], [], set(), first - 1
    for kind, x in items(lines, dev):
        if kind == 'e':
            events.append(x)
            since.add(x['event'])
            if x['event'] == 'reconnected':
                check(isinstance(x.get('gap_seconds'), (int, float)), 'reconnected without gap_seconds: %r' % x)
            continue
        check(x > prev, '%s: value %d after %d (a duplicate or out of order)' % (dev, x, prev))
        if x != prev + 1:
            check('reconnected' in since or 'gap' in since,
                  '%s: values %d..%d missing, and no reconnect or gap reported between %d and %d' % (dev, prev + 1, x - 1, prev, x))
        seqs.append(x)
        prev = x
        since = set()
    links = [e['event'] for e in events if e['event'] in ('disconnected', 'reconnected')]
    check(links == ['disconnected', 'reconnected'] * (len(links) // 2),
          '%s: disconnected and reconnected do not alternate (or the last loss was not followed by a reconnect): %s' % (dev, links))
    if last is not None:
        check(seqs and seqs[-1] == last, '%s: the last value is %s, expected %d' % (dev, seqs[-1] if seqs else None, last))
    c.say('%s: %d values (%s..%s), %d missing, events %s' % (dev, len(seqs), seqs[0] if seqs else '-', prev,
          (prev - first + 1 - len(seqs)) if seqs else 0, [e['event'] for e in events]))
    return seqs, events


def subscribe_bg(c, devs, limit, *opts, out=None, uuid=lab.LAB_STREAM):
    """`bluectl subscribe DEVS UUID OPTS --json` in the background (limit s),
    into out (default NAME.sub.out): the process."""
    out = out or c.path('sub.out')
    return c.bluectl_bg('subscribe', devs, uuid, *opts, '--json', *lab.DEV_OPTS, out=out, limit=limit)


def active(c, proc, devs, secs=40):
    """Each device's stream notifying (periph.py's view), else fail with the
    subscriber's stderr; the subscriber is killed first."""
    for d in devs:
        if not wait_stream(c, 'notifying', secs, d):
            proc.end()
            c.echo(read_text(proc.err))
            c.fail('%s: the subscription never became active' % d)


def ready(c, proc, ok, why):
    """A background subscriber came up (ok), else it is ended, its stderr
    goes to the log and the check fails with why."""
    if not ok:
        proc.end()
        c.echo(read_text(proc.err))
        c.fail(why)


def wait_event(c, proc, event, secs, ended, late):
    """Until the subscriber's output has an "event": EVENT line; it ending
    first fails with ended, the time running out with late (its stderr in
    the log either way)."""
    end = time.monotonic() + secs
    while '"%s"' % event not in read_text(proc.out):
        if not proc.alive():
            c.echo(read_text(proc.err))
            c.fail(ended)
        if time.monotonic() >= end:
            c.echo(read_text(proc.err))
            c.fail(late)
        time.sleep(0.5)


def paced_pair(c, limit, ms=50):
    """Connect both peripherals, `subscribe --reconnect` to both streams in
    the background, both notifying, each streaming one value every ms
    milliseconds (no end: stream_stop ends them): the subscriber."""
    connect_all(c, lab.DEV, lab.DEV2)
    sub = subscribe_bg(c, '%s,%s' % (lab.DEV, lab.DEV2), limit, '--reconnect')
    active(c, sub, (lab.DEV, lab.DEV2))
    stream_start(c, lab.DEV, 100000, ms)
    stream_start(c, lab.DEV2, 100000, ms)
    return sub
