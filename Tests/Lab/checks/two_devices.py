"""Several devices in one subscribe (both peripherals' streams, paced), with
faults injected into the stack: hci2 power-cycled, bluetoothd killed."""
import signal

from labcheck.faults import adapter_identity, bluetoothd_segv, power_cycle
from labcheck.jsonlines import check
from labcheck.lab import DEV, DEV2, PERIPH2_ADAPTER, PERIPH2_ADDR, PERIPH_ADDR
from labcheck.procs import read_text
from labcheck.runner import crashes_since, lab_check, supervisor_mark
from labcheck.streams import (active, connect_all, count_lines, paced_pair, seq_exact, stream_start, stream_stop,
                              subscribe_bg, verify, wait_lines, wait_seq)


@lab_check('two_devices_stream')
def _(c):
    """One subscribe of both peripherals' streams, both paced (one value
    every 10 ms): --count N ends each device after N; every value of both,
    in order."""
    n = 300
    connect_all(c, DEV, DEV2)
    sub = subscribe_bg(c, '%s,%s' % (DEV, DEV2), 150, '--count', n)
    active(c, sub, (DEV, DEV2))
    stream_start(c, DEV, n, 10)
    stream_start(c, DEV2, n, 10)
    rc = sub.wait()
    c.note('subscriber exit %d; stderr: %s' % (rc, read_text(sub.err)[:300]))
    if rc != 0:
        c.fail('subscribe --count %d of two devices exited %d' % (n, rc))
    seq_exact(c, sub.out, n, 'json', DEV)
    seq_exact(c, sub.out, n, 'json', DEV2)
    lines = c.json_lines(sub.out)
    check(all(l.get('device') in (PERIPH_ADDR, PERIPH2_ADDR) for l in lines),
          'a line about another device: %r' % [l for l in lines if l.get('device') not in (PERIPH_ADDR, PERIPH2_ADDR)][:1])
    check(not any('event' in l and l['event'] in ('disconnected', 'reconnected') for l in lines), 'a link was lost')


def stop_both(c, sub):
    """Both streams stop, and every value sent must arrive; then SIGINT ends
    the subscriber with 130. The last numbers of each."""
    last1 = stream_stop(c, DEV) - 1
    last2 = stream_stop(c, DEV2) - 1
    if not wait_seq(c, sub.out, DEV, last1, 30, sub):
        c.fail('%s: its last value (%d) never came' % (DEV, last1))
    if not wait_seq(c, sub.out, DEV2, last2, 30, sub):
        c.fail('%s: its last value (%d) never came' % (DEV2, last2))
    sub.signal(signal.SIGINT)
    rc = sub.wait()
    c.note('subscriber exit %d; stderr: %s' % (rc, read_text(sub.err)[:400]))
    if rc != 130:
        c.fail('subscribe exited %d on SIGINT, expected 130' % rc)
    return last1, last2


def must(c, ok, why, sub=None):
    if not ok:
        if sub is not None:
            c.echo(read_text(sub.err))
        c.fail(why)


@lab_check('two_devices_power_cycle')
def _(c):
    """subscribe --reconnect to both, both paced (one value every 50 ms);
    hci2 powers off and on: hci2's device is reported disconnected then
    reconnected, and its values resume; the other device's numbers have no
    gap at all (unless bluetoothd died meanwhile: then only inside reported
    windows)."""
    sup0 = supervisor_mark()
    sub = paced_pair(c, 280)
    must(c, wait_lines(c, sub.out, DEV2, 'value', 20, 40, sub), '%s: no 20 values before the power cycle' % DEV2)
    must(c, power_cycle(c, PERIPH2_ADAPTER, 2), 'cannot power-cycle %s' % PERIPH2_ADAPTER)
    c.note("%s's identity after: %s" % (PERIPH2_ADAPTER, adapter_identity(PERIPH2_ADAPTER) or ''))
    must(c, wait_lines(c, sub.out, DEV2, 'disconnected', 1, 40, sub), '%s: no disconnected event' % DEV2)
    must(c, wait_lines(c, sub.out, DEV2, 'reconnected', 1, 120, sub), '%s: no reconnected event within 120 s' % DEV2, sub)
    # values of both after the reconnect, then both streams stop and every value sent must arrive
    n2 = count_lines(sub.out, DEV2, 'value')
    must(c, wait_lines(c, sub.out, DEV2, 'value', n2 + 20, 60, sub), '%s: values did not resume after the reconnect' % DEV2)
    last1, last2 = stop_both(c, sub)
    crashed = crashes_since(sup0) > 0
    lines = c.json_lines(sub.out)
    s1, e1 = verify(c, lines, PERIPH_ADDR, last=last1)
    s2, e2 = verify(c, lines, PERIPH2_ADDR, last=last2)
    check(any(e['event'] == 'disconnected' for e in e2) and any(e['event'] == 'reconnected' for e in e2),
          '%s: no disconnected/reconnected pair: %s' % (DEV2, [e['event'] for e in e2]))
    if not crashed:
        check(s1 == list(range(last1 + 1)), '%s: not every value 0..%d in order while %s was power-cycled' % (DEV, last1, DEV2))
        check(not [e for e in e1 if e['event'] in ('disconnected', 'reconnected')],
              '%s: its link was reported lost: %s' % (DEV, [e['event'] for e in e1]))
    else:
        c.say('bluetoothd died during the check: %s may have lost values, but only inside its reported windows' % DEV)


@lab_check('two_devices_bluetoothd_segv')
def _(c):
    """subscribe --reconnect to both, both paced; SIGSEGV to bluetoothd
    mid-stream: the supervisor restarts it (the peripherals' streams go on:
    periph.py outlives bluetoothd), both devices are reported disconnected
    and then reconnected, and every value outside the reported windows
    arrives exactly once, in order."""
    sub = paced_pair(c, 400)
    must(c, wait_lines(c, sub.out, DEV, 'value', 20, 40, sub), '%s: no 20 values before the kill' % DEV)
    must(c, wait_lines(c, sub.out, DEV2, 'value', 20, 40, sub), '%s: no 20 values before the kill' % DEV2)
    must(c, bluetoothd_segv(c, 150), 'bluetoothd was not restarted with both peripherals')
    must(c, wait_lines(c, sub.out, DEV, 'reconnected', 1, 150, sub), '%s: no reconnected event' % DEV, sub)
    must(c, wait_lines(c, sub.out, DEV2, 'reconnected', 1, 150, sub), '%s: no reconnected event' % DEV2, sub)
    n1, n2 = count_lines(sub.out, DEV, 'value'), count_lines(sub.out, DEV2, 'value')
    must(c, wait_lines(c, sub.out, DEV, 'value', n1 + 20, 60, sub), '%s: values did not resume after the restart' % DEV)
    must(c, wait_lines(c, sub.out, DEV2, 'value', n2 + 20, 60, sub), '%s: values did not resume after the restart' % DEV2)
    last1, last2 = stop_both(c, sub)
    lines = c.json_lines(sub.out)
    for dev, last in ((PERIPH_ADDR, last1), (PERIPH2_ADDR, last2)):
        s, e = verify(c, lines, dev, last=last)
        ev = [x['event'] for x in e]
        check('disconnected' in ev and 'reconnected' in ev, '%s: bluetoothd died, but no disconnected/reconnected: %s' % (dev, ev))
