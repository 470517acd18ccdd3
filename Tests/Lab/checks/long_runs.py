"""Checks run only when named (minutes long, or hard on bluetoothd 5.66):
soak_* and extra_*. Scripts/test runs soak_stream_100k,
extra_subscribe_reconnect and extra_stream_acquire in a boot after the tier's."""
import os
import signal
import time

from labcheck.faults import adapter_power
from labcheck.jsonlines import check, seq_of, stream_value_ok
from labcheck.lab import DEV, DEV_OPTS, LAB_CONTROL, LAB_STREAM, PERIPH_ADAPTER
from labcheck.procs import read_text
from labcheck.runner import crashes_since, lab_check, supervisor_mark, supervisor_since
from labcheck.streams import burst_hex, connect_all, ready, wait_event, wait_stream
from checks.central import pair_on_demand


@lab_check('soak_stream_100k')
def _(c):
    n = 100000
    out = '/tmp/%s.out' % c.name
    c.note('100,000 sequence-numbered notifications (StartNotify) into a file: none missing, none doubled, in order')
    # find and connect first, so the subscriber and the stream reads never scan at once
    connect_all(c, DEV)
    sub = c.bluectl_bg('subscribe', DEV, LAB_STREAM, '--count', n, '--check-sequence', 'u32', *DEV_OPTS,
                       out=out, err=c.path('err'), limit=900)
    ready(c, sub, wait_stream(c, 'notifying', 40), 'the peripheral never saw notifications enabled')
    t0 = time.monotonic()
    c.bl('write', DEV, LAB_CONTROL, '0x' + burst_hex(n), '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    rc = sub.wait()
    secs = time.monotonic() - t0
    err = read_text(sub.err)
    c.note('subscriber exit %d after %.1fs; stderr: %s' % (rc, secs, err[:400]))
    if rc != 0:
        c.fail('subscribe --count %d exited %d' % (n, rc))
    if 'sequence check of %s: %d values, 0 missing, 0 late, 0 repeated' % (LAB_STREAM, n) not in err:
        c.fail("bluectl's own sequence check: %s" % ' '.join(l for l in err.splitlines() if 'sequence check' in l))
    # Independently of bluectl's check: the values themselves, by number.
    seqs = []
    with open(out) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3 or parts[1] == '--':
                c.say('event line: ' + line.strip())
                c.fail('the stream in the file is not complete and in order')
            if not stream_value_ok(parts[-1]):
                c.say('corrupt value ' + parts[-1])
                c.fail('the stream in the file is not complete and in order')
            seqs.append(seq_of(parts[-1]))
    ok = seqs == list(range(n))
    c.say('%d values, %d distinct, in order: %s; %.0f values/s over %.1f s' % (len(seqs), len(set(seqs)), ok, n / secs, secs))
    if not ok:
        c.fail('the stream in the file is not complete and in order')
    os.remove(out)


@lab_check('extra_stream_acquire')
def _(c):
    n = 3000
    c.note('AcquireNotify with --check-sequence: every value is printed or its loss reported by number')
    c.note('(BlueZ 5.66 drops AcquireNotify values under a burst, and bluetoothd 5.66 has crashed here during')
    c.note(' such bursts: then the supervisor restarts it, bluectl --reconnect must carry on, and a second burst')
    c.note(' must arrive whole after the reconnect)')
    sup0 = supervisor_mark()
    connect_all(c, DEV)   # see extra_subscribe_reconnect
    sub = c.bluectl_bg('subscribe', DEV, LAB_STREAM, '--notify-via', 'acquire', '--check-sequence', 'u32', '--reconnect',
                       '--json', *DEV_OPTS, out=c.path('stream.out'), err=c.path('stream.err'), limit=240)
    ready(c, sub, wait_stream(c, 'notifying', 40), 'the peripheral never saw notifications enabled')
    t0 = time.monotonic()
    c.bl('write', DEV, LAB_CONTROL, '0x' + burst_hex(n), '--with-response', *DEV_OPTS)
    if crashes_since(sup0) <= 0:
        c.expect_rc(0)
    s = wait_stream(c, 'done', 90)
    if not s:
        c.fail('the burst did not finish')
    c.note('peripheral sent %d in %.1fs' % (s.sent, time.monotonic() - t0))
    crashed = crashes_since(sup0)
    if crashed > 0:
        c.note('bluetoothd died %d time(s) during the burst: %s;' % (crashed, ';'.join(supervisor_since(sup0))))
        wait_event(c, sub, 'reconnected', 120, 'subscribe ended instead of reconnecting after bluetoothd died',
                   "no reconnected event within 120 s of bluetoothd's restart")
        if not wait_stream(c, 'notifying', 60):
            c.fail("notifications not on again after bluetoothd's restart")
        c.note('after the restart: a paced burst of 300 (one every 5 ms) must arrive whole')
        c.bl('write', DEV, LAB_CONTROL, '0x' + burst_hex(300) + burst_hex(5), '--with-response', *DEV_OPTS)
        c.expect_rc(0)
        if not wait_stream(c, 'done', 60):
            c.fail('the second burst did not finish')
    time.sleep(2)
    sub.signal(signal.SIGINT)
    rc = sub.wait()
    c.note('subscriber exit %d; stderr: %s' % (rc, read_text(sub.err)[:400]))
    if rc != 130:
        c.fail('subscribe exited %d on SIGINT, expected 130' % rc)
    if 'sequence check of ' + LAB_STREAM not in read_text(sub.err):
        c.fail('no sequence summary on stderr')
    lines = c.json_lines(sub.out)
    # the first segment: up to the first disconnected event (all of it without a crash)
    first = []
    for l in lines:
        if l.get('event') == 'disconnected':
            break
        first.append(l)
    seqs, reported = [], 0
    for l in first:
        if l.get('event') == 'gap':
            reported += l['missing']
        elif l.get('event') == 'late':
            reported -= 1
        elif 'value' in l:
            v = bytes.fromhex(l['value'])
            check(len(v) == 20, 'value of %d bytes' % len(v))
            seqs.append(seq_of(l['value']))
    check(seqs, 'no values')
    top = max(seqs)
    missing = len(set(range(top + 1)) - set(seqs))
    c.say('acquire: %d of %d values, %d missing before the last (%d reported), %d lost at the end%s' % (
        len(seqs), n, missing, reported, n - 1 - top, ' (bluetoothd died)' if crashed else ''))
    check(len(seqs) == len(set(seqs)), 'duplicates')
    check(missing == reported, 'missing %d but %d reported' % (missing, reported))
    if crashed:
        events = [l['event'] for l in lines if l.get('event') in ('disconnected', 'reconnected')]
        check(events and events == ['disconnected', 'reconnected'] * (len(events) // 2), 'events %s' % events)
        last = [i for i, l in enumerate(lines) if l.get('event') == 'reconnected'][-1]
        after = [seq_of(l['value']) for l in lines[last + 1:] if 'value' in l]
        check(after == list(range(300)), 'after the restart: %d values, not 0..299 in order' % len(after))


@lab_check('extra_subscribe_reconnect')
def _(c):
    c.note('subscribe --reconnect; the peripheral (hci0) powers off and on: the gap is reported, values resume')
    # Connect first, as the soak does. Otherwise the stream reads below may
    # make the connection, and a bluectl read disconnects a connection it
    # made, under the subscriber being set up.
    connect_all(c, DEV)
    sub = c.bluectl_bg('subscribe', DEV, LAB_STREAM, '--reconnect', '--json', '--timeout', '30', *DEV_OPTS,
                       out=c.path('sub.out'), err=c.path('sub.err'), limit=170)
    ready(c, sub, wait_stream(c, 'notifying', 40), 'the peripheral never saw notifications enabled')
    t0 = time.monotonic()
    if not adapter_power(c, PERIPH_ADAPTER, False):
        c.fail('cannot power %s off' % PERIPH_ADAPTER)
    end = time.monotonic() + 40
    while '"disconnected"' not in read_text(sub.out):
        if time.monotonic() >= end:
            c.fail('no disconnected event')
        time.sleep(0.3)
    c.note('disconnected reported after %.1fs; powering hci0 on' % (time.monotonic() - t0))
    time.sleep(2)
    if not adapter_power(c, PERIPH_ADAPTER, True):
        c.fail('cannot power %s on' % PERIPH_ADAPTER)
    wait_event(c, sub, 'reconnected', 90, 'subscribe ended before reconnecting', 'no reconnected event within 90 s')
    c.note('reconnected after %.1fs in all; stderr: %s' % (time.monotonic() - t0, read_text(sub.err)[:400]))
    if not wait_stream(c, 'notifying', 30):
        c.fail('notifications not on again after reconnecting')
    c.bl('write', DEV, LAB_CONTROL, '0x' + burst_hex(5), '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    end = time.monotonic() + 30
    while sum(1 for l in read_text(sub.out).splitlines() if '"value"' in l) < 5:
        if time.monotonic() >= end:
            c.fail('values did not resume')
        time.sleep(0.3)
    sub.signal(signal.SIGTERM)
    rc = sub.wait()
    if rc != 143:
        c.fail('subscribe exited %d on SIGTERM, expected 143' % rc)
    lines = c.json_lines(sub.out)
    events = [l['event'] for l in lines if 'event' in l]
    # The emulated link sometimes comes back for a moment before hci0 is really off (BlueZ says
    # Connected again, then not): every loss must be reported, each followed by its reconnect.
    check(events and events == ['disconnected', 'reconnected'] * (len(events) // 2), 'events %s' % events)
    after = lines[[i for i, l in enumerate(lines) if l.get('event') == 'reconnected'][-1] + 1:]
    seqs = [seq_of(l['value']) for l in after if 'value' in l]
    check(seqs == [0, 1, 2, 3, 4], 'values after reconnecting: %s' % seqs)
    c.say('gaps %s s' % [l['gap_seconds'] for l in lines if l.get('event') == 'reconnected'])


@lab_check('extra_pair_on_demand')
def _(c):
    # Exploration, not in CI: pair_on_demand LAB_PAIR_ROUNDS times in one boot
    # (how the figure in Tests/Lab/README.md was measured).
    n = int(os.environ.get('LAB_PAIR_ROUNDS', '6'))
    for i in range(1, n + 1):
        c.note('round %d of %d' % (i, n))
        pair_on_demand(c)   # a failure ends the check, naming the round above it
