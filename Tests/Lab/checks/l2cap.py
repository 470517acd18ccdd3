"""L2CAP connection-oriented channels (issue 29): `bluectl l2cap listen` on
the server adapter (hci3, made connectable by `bluectl advertise`) and
`bluectl l2cap connect` from the central (hci1), 1 MiB each way checked by
sha256; and bluectl against BlueZ's own l2test (bluez-test-tools) both ways,
l2test on the peripheral adapter (hci0, always advertised)."""
import hashlib
import os
import re
import subprocess
import time

from labcheck import bluez, lab
from labcheck.jsonlines import check, fields, one, parse
from labcheck.lab import CENTRAL, PERIPH_ADDR, PERIPH_ADAPTER, SRV, SRV_ADAPTER
from labcheck.procs import Proc, read_text
from labcheck.runner import lab_check
from labcheck.serving import Scan, need_server, wait_out

MIB = 1 << 20
L2TEST = '/usr/bin/l2test'


def random_file(c, suffix, size):
    """SIZE random bytes in a file of the check: (path, sha256 hex)."""
    data = os.urandom(size)
    path = c.path(suffix)
    with open(path, 'wb') as f:
        f.write(data)
    return path, hashlib.sha256(data).hexdigest()


def sha256_of(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def events(path):
    """bluectl l2cap's --json event lines (its stderr; other lines there, a
    device command's notes, are not events)."""
    return parse('\n'.join(l for l in read_text(path).splitlines() if l.startswith('{')))


def run_bluectl(c, args, stdin_path, limit):
    """bluectl ARGS in the foreground with stdin from a file (or /dev/null):
    (status, seconds, stdout path, stderr path)."""
    c.n += 1
    out, err = c.path('%d.out' % c.n), c.path('%d.err' % c.n)
    c.echo('$ bluectl %s < %s' % (' '.join(args), stdin_path or '/dev/null'))
    with open(stdin_path or os.devnull, 'rb') as stdin:
        p = Proc([lab.BLUECTL] + list(args), out, err, limit=limit, stdin=stdin)
        rc = p.wait()
    secs = time.monotonic() - p.t0
    c.note('exit %d after %.1fs; stderr: %s' % (rc, secs, read_text(err)[:1500]))
    return rc, secs, out, err


def start_listener(c, name, args, stdin_path=None):
    """`bluectl l2cap listen ARGS --json` in the background: (proc, stdout, stderr, psm)."""
    out, err = c.path(name + '.out'), c.path(name + '.err')
    stdin = open(stdin_path, 'rb') if stdin_path else None
    proc = c.spawn([lab.BLUECTL, 'l2cap', 'listen'] + list(args) + ['--json'], out, err, limit=600,
                   stdin=stdin, show='bluectl l2cap listen %s --json < %s   (background)'
                   % (' '.join(args), stdin_path or '/dev/null'))
    if stdin:
        stdin.close()
    if not wait_out(c, err, r'"event": ?"listening"', 60, proc):
        c.fail('l2cap listen printed no listening event: %s' % read_text(err)[:300])
    ev = one(events(err), lambda l: l['event'] == 'listening', 'listening')
    c.note('listening: %r' % ev)
    return proc, out, err, ev['psm']


def transfer_summary(c, what, nbytes, secs):
    rate = nbytes / secs / 1024 if secs > 0 else 0
    c.note('%s: %d bytes in %.1f s (%.1f KiB/s, whole command)' % (what, nbytes, secs, rate))


def closed_event(path, side):
    return one(events(path), lambda l: l['event'] == 'closed', '%s closed event' % side)


def advertise_server(c):
    """The server adapter made connectable (`bluectl advertise` beside the
    check), and seen by a scan first."""
    need_server(c)
    scan = Scan(c, 'bluectl-l2cap')
    adv_out = c.path('adv.out')
    c.spawn([lab.BLUECTL, 'advertise', '--adapter', SRV_ADAPTER, '--name', 'bluectl-l2cap', '--json'], adv_out, limit=900,
            show='bluectl advertise --adapter %s --name bluectl-l2cap --json   (background)' % SRV_ADAPTER)
    scan.wait()


@lab_check('l2cap_bluectl_both_ways')
def _(c):
    """bluectl l2cap listen on hci3 (the kernel picks the PSM) receives 1 MiB
    from bluectl l2cap connect on hci1, then listen on a fixed PSM sends 1 MiB
    to connect: each compared by sha256; the closed events count the bytes,
    the side whose stdin ended closes and both exit 0."""
    advertise_server(c)

    # 1. central -> server, on a dynamic PSM
    data, digest = random_file(c, 'up.bin', MIB)
    listener, got, lerr, psm = start_listener(c, 'listen1', ['--adapter', SRV_ADAPTER, '--no-stdin'])
    check(0x80 <= psm <= 0xff, 'the kernel gave PSM %r, not a dynamic one' % psm)
    rc, secs, _, cerr = run_bluectl(c, ['l2cap', '--adapter', CENTRAL, 'connect', SRV, str(psm), '--json'], data, 300)
    check(rc == 0, 'l2cap connect (sending 1 MiB) exited %d: %s' % (rc, read_text(cerr)[-300:]))
    lrc = listener.wait(60)
    c.note('listen exit %d; stderr: %s' % (lrc, read_text(lerr)[:1500]))
    check(lrc == 0, 'l2cap listen (receiving) exited %d' % lrc)
    opened = one(events(cerr), lambda l: l['event'] == 'connected', 'connected event')
    check(fields(opened, device=SRV, psm=psm, security='none'), 'connected event %r' % opened)
    accepted = one(events(lerr), lambda l: l['event'] == 'accepted', 'accepted event')
    check(accepted.get('device') == lab.CENTRAL_ADDR, 'accepted from %r, expected %s' % (accepted.get('device'), lab.CENTRAL_ADDR))
    check(os.path.getsize(got) == MIB, 'listen wrote %d bytes, expected %d' % (os.path.getsize(got), MIB))
    check(sha256_of(got) == digest, 'the bytes received differ from those sent (sha256)')
    check(fields(closed_event(cerr, 'connect'), sent=MIB, received=0, by='local'), 'connect closed %r' % closed_event(cerr, 'connect'))
    check(fields(closed_event(lerr, 'listen'), sent=0, received=MIB, by='peer'), 'listen closed %r' % closed_event(lerr, 'listen'))
    transfer_summary(c, 'hci1 -> hci3', MIB, closed_event(lerr, 'listen')['seconds'])

    # 2. server -> central, on a fixed PSM
    data, digest = random_file(c, 'down.bin', MIB)
    listener, _, lerr, psm = start_listener(c, 'listen2', ['--adapter', SRV_ADAPTER, '0x0085'], stdin_path=data)
    check(psm == 0x85, 'listening on PSM %r, asked 0x0085' % psm)
    rc, secs, got, cerr = run_bluectl(c, ['l2cap', '--adapter', CENTRAL, 'connect', SRV, '0x85', '--no-stdin', '--json'], None, 300)
    check(rc == 0, 'l2cap connect (receiving 1 MiB) exited %d: %s' % (rc, read_text(cerr)[-300:]))
    lrc = listener.wait(60)
    c.note('listen exit %d; stderr: %s' % (lrc, read_text(lerr)[:1500]))
    check(lrc == 0, 'l2cap listen (sending) exited %d' % lrc)
    check(os.path.getsize(got) == MIB, 'connect wrote %d bytes, expected %d' % (os.path.getsize(got), MIB))
    check(sha256_of(got) == digest, 'the bytes received differ from those sent (sha256)')
    check(fields(closed_event(lerr, 'listen'), sent=MIB, by='local'), 'listen closed %r' % closed_event(lerr, 'listen'))
    check(fields(closed_event(cerr, 'connect'), received=MIB, by='peer'), 'connect closed %r' % closed_event(cerr, 'connect'))
    transfer_summary(c, 'hci3 -> hci1', MIB, closed_event(cerr, 'connect')['seconds'])


STALLED_READER = """import fcntl, os, sys, time
fcntl.fcntl(0, 1031, 4096)  # F_SETPIPE_SZ: one page of pipe
time.sleep(float(sys.argv[2]))
with open(sys.argv[1], 'wb') as f:
    while True:
        b = os.read(0, 1 << 16)
        if not b:
            break
        f.write(b)
"""


@lab_check('l2cap_stalled_reader')
def _(c):
    """bluectl l2cap listen on hci3 with stdout a pipe nobody reads for 30 s,
    while bluectl l2cap connect on hci1 sends 3 MiB and closes: listen's
    writer holds 1 MiB, then listen stops reading the channel (the kernel's
    credits hold the sender back) instead of dropping or blocking its event
    loop; once the reader reads, every byte arrives (sha256), both exit 0
    and the closed event counts them all (issue 26: the loop never blocks on
    stdout)."""
    advertise_server(c)
    size, stall = 3 * MIB, 30
    data, digest = random_file(c, 'stalled.bin', size)
    got, lerr, out = c.path('stalled.got'), c.path('stalled-listen.err'), c.path('stalled.out')
    shell = ('"$0" l2cap listen --adapter "$1" --no-stdin --json 2>"$2" | /usr/bin/python3 -c "$3" "$4" "$5"; '
             'echo "status=${PIPESTATUS[0]}"')
    proc = c.spawn(['/bin/bash', '-c', shell, lab.BLUECTL, SRV_ADAPTER, lerr, STALLED_READER, got, stall], out, limit=600,
                   show='bluectl l2cap listen --adapter %s --no-stdin --json | (a reader asleep %d s, then cat)   (background)'
                   % (SRV_ADAPTER, stall))
    if not wait_out(c, lerr, r'"event": ?"listening"', 60, proc):
        c.fail('l2cap listen printed no listening event: %s' % read_text(lerr)[:300])
    psm = one(events(lerr), lambda l: l['event'] == 'listening', 'listening')['psm']
    rc, secs, _, cerr = run_bluectl(c, ['l2cap', '--adapter', CENTRAL, 'connect', SRV, str(psm), '--json'], data, 300)
    check(rc == 0, 'l2cap connect (sending %d bytes) exited %d: %s' % (size, rc, read_text(cerr)[-300:]))
    # connect closed before the reader woke: what listen had not read then was in its socket
    c.note('connect sent and closed in %.1f s; the reader slept %d s from before listen listened' % (secs, stall))
    prc = proc.wait(120)
    c.note('listen pipeline exit %d: %s; stderr: %s' % (prc, read_text(out).strip(), read_text(lerr)[:1500]))
    check('status=0' in read_text(out), 'l2cap listen (behind the stalled reader) did not exit 0: %s' % read_text(out)[:300])
    check(os.path.getsize(got) == size, 'the reader got %d bytes, expected %d' % (os.path.getsize(got), size))
    check(sha256_of(got) == digest, 'the bytes received differ from those sent (sha256)')
    check(fields(closed_event(lerr, 'listen'), received=size, by='peer'), 'listen closed %r' % closed_event(lerr, 'listen'))
    transfer_summary(c, 'hci1 -> hci3, reader stalled %d s' % stall, size, closed_event(lerr, 'listen')['seconds'])


@lab_check('l2cap_refused_psm')
def _(c):
    """A PSM nothing listens on: l2cap connect fails with one line and 69
    (the device refused the channel), and leaves no connection it made."""
    rc, _, _, err = run_bluectl(c, ['l2cap', '--adapter', CENTRAL, 'connect', PERIPH_ADDR, '0x00f1'], None, 120)
    text = read_text(err).strip()
    check(rc == 69, 'exit %d, expected 69: %s' % (rc, text[:300]))
    check(len(text.splitlines()) == 1 and 'refused by the device' in text, 'stderr: %s' % text[:300])


L2CAP_DEBUGFS = '/sys/kernel/debug/bluetooth/l2cap'
BT_LISTEN = '4'


def wait_listening(c, psm, proc, secs=30):
    """Until the kernel lists a channel listening on PSM (debugfs: src (type)
    dst (type) state psm ...): l2test says nothing when it listens, and a
    connect before its listen(2) is refused."""
    end = time.monotonic() + secs
    while time.monotonic() < end and proc.alive():
        try:
            with open(L2CAP_DEBUGFS) as f:
                rows = [l.split() for l in f]
        except OSError as e:
            c.fail('cannot read %s: %s' % (L2CAP_DEBUGFS, e))
        if any(len(r) > 5 and r[4] == BT_LISTEN and r[5] == str(psm) for r in rows):
            return
        time.sleep(0.2)
    c.fail('nothing listens on PSM %d after %d s (l2test %s)' % (psm, secs, 'running' if proc.alive() else 'ended'))


def l2test_bytes(text):
    """What l2test -d says it received, summed ('Recevied N bytes' lines:
    BlueZ's spelling, matched loosely)."""
    return sum(int(n) for n in re.findall(r'Rec\w*ved (\d+) bytes', text))


@lab_check('l2cap_l2test_both_ways')
def _(c):
    """bluectl against BlueZ's l2test on hci0: l2test -d (listen and dump)
    counts the 256 KiB bluectl l2cap connect sends; bluectl l2cap listen
    counts what l2test -s (connect and send) sends, 512 frames of 512 bytes."""
    if not os.access(L2TEST, os.X_OK):
        c.skip('no %s in the guest (bluez-test-tools)' % L2TEST)
    size = 256 * 1024
    # 1. bluectl -> l2test -d
    data, _ = random_file(c, 'to-l2test.bin', size)
    dump_out = c.path('l2test-d.out')
    dump = c.spawn([L2TEST, '-d', '-V', 'le_public', '-P', '135', '-i', PERIPH_ADAPTER], dump_out, limit=300,
                   show='l2test -d -V le_public -P 135 -i %s   (background)' % PERIPH_ADAPTER)
    wait_listening(c, 135, dump)   # l2test reads -P in decimal only
    # --linger: l2test -d prints a hex dump of each SDU and falls behind
    # under TCG; Linux 6.1 shows it the channel's end before the SDUs still
    # queued in its socket (docs/l2cap.md), so closing at once lost the last
    # few (seen: an exact prefix, 3040 bytes short)
    rc, secs, _, cerr = run_bluectl(c, ['l2cap', '--adapter', CENTRAL, 'connect', PERIPH_ADDR, '0x0087', '--linger', '10', '--json'],
                                    data, 300)
    check(rc == 0, 'l2cap connect to l2test -d exited %d: %s' % (rc, read_text(cerr)[-300:]))
    check(fields(closed_event(cerr, 'connect'), sent=size), 'connect closed %r' % closed_event(cerr, 'connect'))
    end = time.monotonic() + 30
    while l2test_bytes(read_text(dump_out) + read_text(dump_out + '.err')) < size and time.monotonic() < end:
        time.sleep(0.5)
    dump.end()
    got = l2test_bytes(read_text(dump_out) + read_text(dump_out + '.err'))
    c.note('l2test -d counted %d bytes; its stderr: %s' % (got, read_text(dump_out + '.err')[:600]))
    check(got == size, 'l2test -d received %d bytes, bluectl sent %d' % (got, size))
    transfer_summary(c, 'bluectl (hci1) -> l2test -d (hci0)', size, closed_event(cerr, 'connect')['seconds'])

    # 2. l2test -s -> bluectl listen
    frames, frame = 512, 512
    listener, got_path, lerr, psm = start_listener(c, 'listen', ['--adapter', PERIPH_ADAPTER, '--no-stdin'])
    c.n += 1
    s_out = c.path('%d.l2test-s' % c.n)
    c.echo('$ l2test -s -V le_public -P %d -N %d -b %d -g 3000 -i %s %s' % (psm, frames, frame, CENTRAL, PERIPH_ADDR))
    p = subprocess.run([L2TEST, '-s', '-V', 'le_public', '-P', str(psm), '-N', str(frames), '-b', str(frame), '-g', '3000',
                        '-i', CENTRAL, PERIPH_ADDR], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    with open(s_out, 'wb') as f:
        f.write(p.stdout)
    c.note('l2test -s exit %d: %s' % (p.returncode, p.stdout.decode('utf-8', 'replace')[-600:]))
    check(p.returncode == 0, 'l2test -s exited %d' % p.returncode)
    lrc = listener.wait(60)
    c.note('listen exit %d; stderr: %s' % (lrc, read_text(lerr)[:1500]))
    check(lrc == 0, 'l2cap listen (receiving from l2test) exited %d' % lrc)
    closed = closed_event(lerr, 'listen')
    check(fields(closed, received=frames * frame, by='peer'), 'listen closed %r' % closed)
    check(os.path.getsize(got_path) == frames * frame, 'listen wrote %d bytes' % os.path.getsize(got_path))
    transfer_summary(c, 'l2test -s (hci1) -> bluectl (hci0)', frames * frame, closed['seconds'])


@lab_check('l2cap_security_encrypted')
def _(c):
    """A listener on hci3 at --security medium and a central asking the
    same: the central pairs on demand (its agent, Just Works), the kernel
    encrypts the link, and both ends report an encrypted channel with a
    16-byte key; 64 KiB arrive intact. The bond is removed afterwards."""
    need_server(c)
    scan = Scan(c, 'bluectl-l2sec')
    c.spawn([lab.BLUECTL, 'advertise', '--adapter', SRV_ADAPTER, '--name', 'bluectl-l2sec', '--json'], c.path('adv.out'), limit=600,
            show='bluectl advertise --adapter %s --name bluectl-l2sec --json   (background)' % SRV_ADAPTER)
    scan.wait()
    size = 64 * 1024
    data, digest = random_file(c, 'up.bin', size)
    listener, got, lerr, psm = start_listener(c, 'listen', ['--adapter', SRV_ADAPTER, '--security', 'medium', '--no-stdin'])
    try:
        rc, _, _, cerr = run_bluectl(c, ['l2cap', '--adapter', CENTRAL, 'connect', SRV, str(psm), '--security', 'medium', '--json'],
                                     data, 300)
        check(rc == 0, 'l2cap connect --security medium exited %d: %s' % (rc, read_text(cerr)[-300:]))
        lrc = listener.wait(60)
        c.note('listen exit %d; stderr: %s' % (lrc, read_text(lerr)[:1500]))
        check(lrc == 0, 'l2cap listen --security medium exited %d' % lrc)
        opened = one(events(cerr), lambda l: l['event'] == 'connected', 'connected event')
        accepted = one(events(lerr), lambda l: l['event'] == 'accepted', 'accepted event')
        check(fields(opened, security='encrypted', key_size=16), 'connected event %r' % opened)
        check(fields(accepted, security='encrypted', key_size=16), 'accepted event %r' % accepted)
        check(sha256_of(got) == digest and os.path.getsize(got) == size, 'the bytes received differ from those sent')
    finally:
        for addr, adapter in ((SRV, CENTRAL), (lab.CENTRAL_ADDR, SRV_ADAPTER)):
            try:
                bluez.remove(addr, adapter)
            except Exception as e:   # noted: a later check's need_server removes the central's side again
                c.note('remove %s on %s: %s' % (addr, adapter, e))


class Running:
    """A Popen as wait_listening asks: alive()."""

    def __init__(self, p):
        self.p = p

    def alive(self):
        return self.p.poll() is None


def timed(argv, out, stdin=None, discard_stdout=False):
    """Start argv (stdout and stderr to out; stdout to /dev/null when
    discarded: bluectl's data); a function that waits for it: (status, wall
    seconds, CPU seconds user+system) from wait4's rusage."""
    f = open(out, 'wb')
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL if discard_stdout else f, stderr=f)

    def wait():
        _, st, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(st)
        f.close()
        return p.returncode, time.monotonic() - t0, ru.ru_utime + ru.ru_stime
    return p, wait


@lab_check('extra_l2cap_throughput')
def _(c):
    """Figures, not a pass mark: 1 MiB over an LE channel hci1 -> hci3, by
    bluectl (l2cap connect < file, l2cap listen > /dev/null) and by l2test
    (-s 1561 frames of 672 bytes, -r), each side's wall time and CPU
    (wait4's rusage, the whole process: set-up included). Checked: every
    byte arrives. Run it alone: Scripts/lab test 'extra_l2cap_throughput'."""
    need_server(c)
    scan = Scan(c, 'bluectl-l2perf')
    c.spawn([lab.BLUECTL, 'advertise', '--adapter', SRV_ADAPTER, '--name', 'bluectl-l2perf', '--json'], c.path('adv.out'), limit=900,
            show='bluectl advertise --adapter %s --name bluectl-l2perf --json   (background)' % SRV_ADAPTER)
    scan.wait()
    frames, frame = 1561, 672
    size = frames * frame
    data, _ = random_file(c, 'data.bin', size)
    rows = []
    for run in range(2):
        # bluectl -> bluectl
        lout = c.path('bl-listen%d.err' % run)
        lp, lwait = timed([lab.BLUECTL, 'l2cap', 'listen', '--adapter', SRV_ADAPTER, '0x0091', '--no-stdin', '--json'], lout,
                          discard_stdout=True)
        if not wait_out(c, lout, r'"event": ?"listening"', 60):
            c.fail('l2cap listen printed no listening event')
        with open(data, 'rb') as stdin:
            cp, cwait = timed([lab.BLUECTL, 'l2cap', '--adapter', CENTRAL, 'connect', SRV, '0x0091', '--json'], c.path('bl-connect%d.err' % run),
                              stdin=stdin)
            crc, cwall, ccpu = cwait()
        lrc, lwall, lcpu = lwait()
        c.note('bluectl run %d: connect exit %d, %.2f s, CPU %.3f s; listen exit %d, %.2f s, CPU %.3f s'
               % (run, crc, cwall, ccpu, lrc, lwall, lcpu))
        closed = one(events(lout), lambda l: l['event'] == 'closed', 'listen closed')
        check(crc == 0 and lrc == 0 and closed['received'] == size, 'bluectl run %d: %r' % (run, closed))
        rows.append(('bluectl', run, size, closed['seconds'], ccpu, lcpu))
        # l2test -> l2test
        rout = c.path('l2test-r%d.out' % run)
        rp, rwait = timed([L2TEST, '-r', '-V', 'le_public', '-P', '145', '-b', str(frame), '-i', SRV_ADAPTER], rout)
        wait_listening(c, 145, Running(rp))
        sp, swait = timed([L2TEST, '-s', '-V', 'le_public', '-P', '145', '-b', str(frame), '-N', str(frames), '-g', '3000',
                           '-i', CENTRAL, SRV], c.path('l2test-s%d.out' % run))
        src, swall, scpu = swait()
        end = time.monotonic() + 30
        while rp.poll() is None and time.monotonic() < end:
            time.sleep(0.2)
        if rp.poll() is None:
            rp.terminate()
        rrc, rwall, rcpu = rwait()
        text = read_text(rout)
        c.note('l2test run %d: -s exit %d, %.2f s, CPU %.3f s; -r exit %d, CPU %.3f s; -r says: %s'
               % (run, src, swall, scpu, rrc, rcpu, ' | '.join(l for l in text.splitlines() if 'bytes in' in l)[-400:]))
        rates = re.findall(r'(\d+) bytes in ([\d.]+) sec', text)
        check(src == 0 and rates, 'l2test run %d: no transfer reported: %s' % (run, text[-300:]))
        # -r reports each SDU it read (its seconds are the read's own, not the
        # transfer's): the bytes are summed; the time is -s's wall time,
        # connection set-up and its 3 s -g wait before disconnecting included
        got = sum(int(n) for n, _ in rates)
        check(got == size, 'l2test run %d: -r counted %d bytes of %d' % (run, got, size))
        rows.append(('l2test', run, got, swall, scpu, rcpu))
    for who, run, n, secs, scpu, rcpu in rows:
        how = 'accept to close (listen)' if who == 'bluectl' else 'l2test -s wall, set-up and -g 3 s included'
        c.note('%-7s run %d: %d bytes in %.2f s (%s); CPU (whole process) sender %.3f s (%.2f us/byte), receiver %.3f s (%.2f us/byte)'
               % (who, run, n, secs, how, scpu, scpu * 1e6 / n, rcpu, rcpu * 1e6 / n))
