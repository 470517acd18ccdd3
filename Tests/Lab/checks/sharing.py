"""Exactly once, whoever else listens: bluetoothd 5.66 sends every
subscriber one Value signal per StartNotify session and one per read
(docs/notifications.md)."""
import os
import time

from labcheck import lab
from labcheck.lab import DEV, DEV_OPTS, LAB_CONTROL, LAB_STREAM
from labcheck.procs import read_text
from labcheck.runner import lab_check
from labcheck.streams import burst_hex, connect_all, ready, seq_exact, stream_state, wait_stream


def join_and_burst(c, n, first, out):
    """Beside the subscriber `first`, a bluectl subscriber into out, which must
    report sharing that session; then a burst of n values; waits for both:
    their exit statuses."""
    second = c.bluectl_bg('subscribe', DEV, LAB_STREAM, '--count', n, '--json', *DEV_OPTS, out=out, limit=150)
    # generous: under TCG on a loaded host a bluectl's start, find and join took over 40 s
    end = time.monotonic() + 90
    while '"shared_session"' not in read_text(out):
        if not second.alive():
            c.echo(read_text(second.err))
            c.fail('the joining bluectl ended before sharing the session')
        if time.monotonic() >= end:
            first.end()
            second.end()
            c.echo(read_text(second.err))
            c.fail('the joining bluectl never reported sharing the session')
        time.sleep(0.3)
    c.bl('write', DEV, LAB_CONTROL, '0x' + burst_hex(n), '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    ra, rb = first.wait(), second.wait()
    c.note('exits: first %d, joining bluectl %d; its stderr: %s' % (ra, rb, read_text(second.err)[:300]))
    return ra, rb


@lab_check('subscribe_two_bluectl')
def _(c):
    n = 300
    a, b = c.path('a.out'), c.path('b.out')
    c.note("two bluectl subscribers on one characteristic: the second shares the first's session; each prints every value once")
    connect_all(c, DEV)
    first = c.bluectl_bg('subscribe', DEV, LAB_STREAM, '--count', n, '--json', *DEV_OPTS, out=a, limit=120)
    ready(c, first, wait_stream(c, 'notifying', 40), 'the first subscriber never subscribed')
    ra, rb = join_and_burst(c, n, first, b)
    if not (ra == 0 and rb == 0):
        c.fail('subscribers exited %d and %d' % (ra, rb))
    seq_exact(c, a, n, 'json')
    seq_exact(c, b, n, 'json')
    if '"shared_session"' in read_text(a):
        c.fail('the first subscriber says it shared a session')


@lab_check('subscribe_beside_python')
def _(c):
    n = 300
    a, b = c.path('py.out'), c.path('bl.out')
    c.note('a python3-dbus subscriber (StartNotify) first, then bluectl: bluectl shares its session; both see every value once')
    connect_all(c, DEV)
    first = c.spawn([lab.PY, '-I', os.path.join(lab.HERE, 'pysub.py'), lab.CENTRAL, DEV, LAB_STREAM, n, 120], a)
    ready(c, first, wait_stream(c, 'notifying', 60), 'the python subscriber never subscribed')
    ra, rb = join_and_burst(c, n, first, b)
    if not (ra == 0 and rb == 0):
        c.fail('subscribers exited python %d, bluectl %d' % (ra, rb))
    seq_exact(c, a, n, 'hex')
    seq_exact(c, b, n, 'json')


@lab_check('subscribe_read_by_other')
def _(c):
    n = 150
    a = c.path('sub.out')
    c.note('bluectl subscribed while another bluectl reads the characteristic: the reads add no line')
    connect_all(c, DEV)
    sub = c.bluectl_bg('subscribe', DEV, LAB_STREAM, '--count', n, '--json', *DEV_OPTS, out=a, limit=120)
    ready(c, sub, wait_stream(c, 'notifying', 40), 'the subscriber never subscribed')
    # one value every 30 ms (~4.5 s), read three times meanwhile
    c.bl('write', DEV, LAB_CONTROL, '0x' + burst_hex(n) + burst_hex(30), '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    reads = 0
    for _ in range(3):
        c.bl('read', DEV, LAB_STREAM, '--json', *DEV_OPTS)
        c.expect_rc(0)
        reads += 1
    ra = sub.wait()
    c.note('subscriber exit %d after %d reads; stderr: %s' % (ra, reads, read_text(sub.err)[:300]))
    if ra != 0:
        c.fail('subscribe exited %d' % ra)
    s = stream_state(c)
    if s and s.running == 1:
        c.note('(the stream was still running when the subscriber had its %d values)' % n)
    seq_exact(c, a, n, 'json')
