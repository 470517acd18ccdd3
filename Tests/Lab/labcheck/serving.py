"""bluectl's peripheral role in checks: serve and advertise on the server
adapter (lab.SERVER, hci3), the central's scan for them, their
registrations with bluetoothd (seen by dbus-monitor), values fed on serve's
stdin.

btvirt reports an advertisement when its set is enabled (and when a scan
starts, but the kernel drops that one), and bluectl's advertisement is
registered once, with no pulse: so a check starts the central's scan first
(scan_start), then the advertiser."""
import re
import subprocess
import time

import dbus

from . import bluez, lab
from .jsonlines import parse
from .procs import read_text
from .streams import seq_exact


def wait_out(c, path, pattern, secs, proc=None, n=1):
    """Until the file has n lines matching the regular expression; a process
    that ended ends the wait. False (and a line in the log) when they did not come."""
    rx = re.compile(pattern)
    count = lambda: sum(1 for l in read_text(path).splitlines() if rx.search(l))
    end = time.monotonic() + secs
    while count() < n:
        if proc is not None and not proc.alive():
            if count() >= n:
                return True
            c.echo("wait for '%s' in %s: the process ended" % (pattern, path.rsplit('/', 1)[-1]))
            return False
        if time.monotonic() >= end:
            c.echo("timeout: %d of %d lines '%s' in %s after %s s" % (count(), n, pattern, path.rsplit('/', 1)[-1], secs))
            return False
        time.sleep(0.2)
    return True


def need_server(c):
    """The server adapter exists; the central forgets the server's device (a
    scan then reports it anew, with the advertisement of this check)."""
    if not (lab.SRV_ADAPTER and lab.SRV):
        c.fail('no server adapter (SERVER=%s SERVER_ADDR=%s): the lab needs btvirt -l4' % (lab.SRV_ADAPTER, lab.SRV))
    try:
        known = bluez.remove(lab.SRV)
    except dbus.DBusException:
        known = False
    if not known:
        c.note('remove: %s did not know %s' % (lab.CENTRAL, lab.SRV))


class Serve:
    """`bluectl serve SPEC ARGS --timeout 600` in the background, stdin a pipe
    (feed() writes lines to it); waits (60 s) for its "serving" line."""

    def __init__(self, c, *args):
        self.c = c
        self.out, self.err = c.path('serve.out'), c.path('serve.err')
        self.proc = c.spawn([lab.BLUECTL, 'serve'] + list(args) + ['--timeout', '600'], self.out, self.err,
                            stdin=subprocess.PIPE,
                            show='bluectl serve %s --timeout 600   (background; stdin: a pipe)' % ' '.join(args))
        if not wait_out(c, self.out, r'"event": ?"serving"', 60, self.proc):
            c.echo(read_text(self.err))
            c.fail('bluectl serve did not print its serving line')
        c.note('serving: %s' % read_text(self.out).split('\n', 1)[0])

    def feed(self, text):
        self.proc.p.stdin.write(text.encode())
        self.proc.p.stdin.flush()

    def feed_seq(self, uuid, n):
        """n lines on serve's stdin, values uint32 LE 0..n-1."""
        self.feed(''.join('{"characteristic":"%s","value":"%02x%02x%02x%02x"}\n'
                          % (uuid, i % 256, i // 256 % 256, i // 65536 % 256, 0) for i in range(n)))

    def wait_out(self, pattern, secs, n=1):
        return wait_out(self.c, self.out, pattern, secs, self.proc, n)

    def lines(self):
        """serve's stdout as JSON lines."""
        return parse(read_text(self.out))

    def stop(self, sig):
        """The signal ('INT'/'TERM'), then (20 s) its exit: the status."""
        import signal
        self.proc.signal(getattr(signal, 'SIG' + sig))
        rc = self.proc.wait(20)
        try:
            self.proc.p.stdin.close()
        except OSError:
            pass
        self.c.note('serve exit %d after SIG%s; stderr: %s' % (rc, sig, read_text(self.err)[:400]))
        self.c.echo("# serve's stdout:\n" + read_text(self.out))
        return rc


class Scan:
    """`bluectl scan` on the central for NAME in the background; waits until
    the central is discovering."""

    def __init__(self, c, name):
        self.c = c
        self.out = c.path('scan.out')
        args = ['scan', '--adapter', lab.CENTRAL, '--name', name, '--count', '1', '--json', '--timeout', '120']
        self.proc = c.spawn([lab.BLUECTL] + args, self.out, limit=150,
                            show='bluectl %s   (background)' % ' '.join(args))
        if not bluez.wait_adapter('Discovering', True, 30, log=c.echo):
            c.fail('%s not discovering for the scan' % lab.CENTRAL)

    def wait(self):
        """Its exit (150 s), expected 0: its output as JSON lines."""
        rc = self.proc.wait(150)
        self.c.note('scan exit %d; stderr: %s' % (rc, read_text(self.out + '.err')[:300]))
        if rc != 0:
            self.c.fail('bluectl scan for the advertised name exited %d' % rc)
        return parse(read_text(self.out))


def adv_instances():
    return bluez.adv_instances(lab.SRV_ADAPTER)


def wait_adv_instances(n, secs):
    end = time.monotonic() + secs
    while adv_instances() != n:
        if time.monotonic() >= end:
            return False
        time.sleep(0.2)
    return True


class Registrations:
    """dbus-monitor of the registrations sent to bluetoothd
    (GattManager1/LEAdvertisingManager1 Register*/Unregister*)."""

    def __init__(self, c):
        self.c = c
        self.log = c.path('registrations')
        c.spawn(['dbus-monitor', '--system',
                 "type='method_call',destination='org.bluez',interface='org.bluez.GattManager1'",
                 "type='method_call',destination='org.bluez',interface='org.bluez.LEAdvertisingManager1'"],
                self.log, err=self.log + '.err')
        time.sleep(0.5)

    def paths(self, want):
        """The object paths bluectl registered (want 'Register') or
        unregistered ('Unregister'): under /org/bluectl/, but not the lab's
        own /org/bluectl/lab."""
        found = set()
        it = iter(read_text(self.log).splitlines())
        for line in it:
            m = re.search(r'member=((Register|Unregister)(Application|Advertisement))', line)
            if not m:
                continue
            nxt = next(it, '')
            p = re.search(r'object path "([^"]*)"', nxt)
            if p and re.match('^%s(Application|Advertisement)$' % want, m.group(1)) \
                    and p.group(1).startswith('/org/bluectl/') and not p.group(1).startswith('/org/bluectl/lab'):
                found.add(p.group(1))
        return sorted(found)

    def all_undone(self):
        """Every registration of bluectl's was undone by bluectl itself (an
        Unregister* call, not bluetoothd's clean-up after the process left)."""
        r, u = self.paths('Register'), self.paths('Unregister')
        self.c.note('registered: %s; unregistered: %s' % (' '.join(r), ' '.join(u)))
        if not r:
            self.c.fail("no registration of bluectl's seen on the bus (dbus-monitor: %s)" % read_text(self.log)[:200])
        if r != u:
            self.c.fail('registered but never unregistered by bluectl: %s ' % ' '.join(x for x in r if x not in u))


def serve_stream(c, serve, uuid, n, out, what):
    """`bluectl subscribe --count n --json` on the central into out; once
    serve printed the subscription, n numbered values fed on serve's stdin
    must all arrive, in order."""
    p = c.bluectl_bg('subscribe', lab.SRV, uuid, '--count', n, '--json', *lab.DEV_OPTS, out=out, limit=180)
    if not serve.wait_out(r'"event": ?"subscribed".*%s|%s.*"event": ?"subscribed"' % (uuid, uuid), 40):
        c.echo(read_text(out + '.err'))
        c.fail('serve saw no subscription to %s (%s)' % (uuid, what))
    if not bluez.wait_notifying(lab.SRV, uuid, 20):
        c.fail('bluetoothd (%s) does not show %s notifying' % (lab.CENTRAL, uuid))
    serve.feed_seq(uuid, n)
    rc = p.wait(180)
    c.note('subscriber (%s) exit %d; stderr: %s' % (what, rc, read_text(out + '.err')[:300]))
    if rc != 0:
        c.fail('subscribe --count %d (%s) exited %d after %d values' % (n, what, rc, read_text(out).count('"value"')))
    seq_exact(c, out, n, 'json')
