"""One check's context: every bluectl call logged with its real stdout,
stderr and exit status in $LAB_OUT/checks/NAME.log, the expectations on
them, and the check's background processes (ended when the check ends)."""
import datetime
import os
import signal
import subprocess
import time

from . import lab
from .jsonlines import CheckFailed, parse
from .procs import Proc, read_text

BL_TIMEOUT = float(os.environ.get('BL_TIMEOUT', '60'))


class CheckSkipped(Exception):
    """A check that could not run (a skip fails the tier: runner.py)."""


class Result:
    """One command's outcome: rc, out/err (file paths), secs, killed."""

    def __init__(self, rc, out, err, secs=0.0, killed=False):
        self.rc, self.out, self.err, self.secs, self.killed = rc, out, err, secs, killed

    @property
    def stdout(self):
        return read_text(self.out)

    @property
    def stderr(self):
        return read_text(self.err)


class Check:
    """What a check function gets (`def my_check(c)`): c.bl(...) runs
    bluectl, c.expect_rc(...) and friends assert on the last call, c.note()
    writes to the check's log, c.spawn()/c.bluectl_bg() start processes that
    end with the check."""

    def __init__(self, name):
        self.name = name
        self.n = 0
        self.last = None
        self.bg = []
        self.base = os.path.join(lab.CHECK_DIR, name)
        self.log = open(self.base + '.log', 'w', buffering=1, encoding='utf-8', errors='replace')

    # ---- the log
    def echo(self, text):
        self.log.write(text + '\n')

    def note(self, text):
        self.echo('# ' + text)

    say = echo

    def fail(self, why):
        raise CheckFailed(why)

    def skip(self, why):
        raise CheckSkipped(why)

    def path(self, suffix):
        """A file of this check in the checks folder: NAME.SUFFIX."""
        return '%s.%s' % (self.base, suffix)

    def _show(self, res, out_limit=20000, err_limit=4000):
        o, e = res.stdout, res.stderr
        if o:
            self.echo('# stdout:\n' + o[:out_limit])
        if e:
            self.echo('# stderr:\n' + e[:err_limit])

    # ---- running bluectl
    def bl(self, *args, env=None, timeout=BL_TIMEOUT):
        """bluectl ARGS, stdin /dev/null, killed after `timeout` s (60); the
        result is c.last (rc, out, err, secs, killed). env: extra variables."""
        self.n += 1
        out, err = self.path('%d.out' % self.n), self.path('%d.err' % self.n)
        self.echo('$ bluectl ' + ' '.join(args))
        self.note('started %s (compare btmon.log)' % datetime.datetime.now().strftime('%H:%M:%S.%f')[:-3])
        e = dict(os.environ, **env) if env else None
        p = Proc([lab.BLUECTL] + [str(a) for a in args], out, err, limit=timeout, env=e)
        rc = p.wait()
        res = Result(rc, out, err, time.monotonic() - p.t0, killed=p.timed_out)
        self.note('exit %d after %.1fs' % (rc, res.secs))
        self._show(res)
        if res.killed:
            self.note('killed: no exit within %gs' % timeout)
        self.last = res
        return res

    def bl_signal(self, sig, delay, *args):
        """bluectl ARGS, sent SIGINT/SIGTERM after `delay` s; rc as a shell
        would see it (130/143), 124 when it ignored the signal for 15 s."""
        self.n += 1
        out, err = self.path('%d.out' % self.n), self.path('%d.err' % self.n)
        self.echo('$ bluectl %s   (SIG%s after %ss)' % (' '.join(args), sig, delay))
        p = Proc([lab.BLUECTL] + list(args), out, err)
        try:
            p.p.wait(delay)
            self.note('exited before the signal')
            rc = p.wait()
        except subprocess.TimeoutExpired:
            p.signal(getattr(signal, 'SIG' + sig))
            rc = p.wait(15)
        res = Result(rc, out, err)
        self.note('exit %d' % rc)
        self._show(res, 4000, 4000)
        self.last = res
        return res

    def gattc(self, *args):
        """Tests/Lab/gattc.py ARGS on the central, logged like bl (90 s limit)."""
        self.n += 1
        out = self.path('%d.gattc' % self.n)
        self.echo('$ gattc.py ' + ' '.join(args))
        p = Proc([lab.PY, '-I', os.path.join(lab.HERE, 'gattc.py'), '--adapter', lab.CENTRAL] + list(args),
                 out, out + '.err', limit=90)
        res = Result(p.wait(), out, out + '.err')
        self.note('exit %d' % res.rc)
        if res.stdout:
            self.echo(res.stdout[:3000])
        if res.stderr:
            self.echo('# stderr:\n' + res.stderr[:1000])
        return res

    def run(self, argv, timeout=60):
        """Another program (busctl, ...), its output into the log: its status."""
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
        if p.stdout:
            self.echo(p.stdout.decode('utf-8', 'replace').rstrip('\n'))
        return p.returncode

    # ---- expectations on the last bluectl call
    def first_err(self):
        return self.last.stderr[:300].replace('\n', ' ')

    def expect_rc(self, *want):
        r = self.last
        if r.killed:
            self.fail('bluectl %s did not finish within %gs (killed)' % (' '.join(str(w) for w in want), BL_TIMEOUT))
        if r.rc not in want:
            err = self.first_err()
            self.fail('exit status %d, expected %s%s' % (r.rc, ' '.join(str(w) for w in want),
                                                          '; stderr: ' + err if r.err else ''))

    def expect_out(self, text):
        if text.lower() not in self.last.stdout.lower():
            self.fail("stdout lacks '%s'" % text)

    def expect_no_out(self, text):
        if text.lower() in self.last.stdout.lower():
            self.fail("stdout has '%s'" % text)

    def json_lines(self, path=None):
        """The last call's stdout (or the file at path) parsed as JSON lines."""
        return parse(read_text(path or self.last.out))

    # ---- background processes
    def spawn(self, argv, out, err=None, limit=None, stdin=None, show=None):
        """Start argv in the background (stdout to out, stderr to err or
        out.err); it is ended when the check ends, however it ends."""
        if show:
            self.echo('$ ' + show)
        p = Proc([str(a) for a in argv], out, err or out + '.err', limit=limit, stdin=stdin)
        self.bg.append(p)
        return p

    def bluectl_bg(self, *args, out, limit, err=None):
        """bluectl ARGS in the background, like `timeout -k 5 LIMIT bluectl ARGS &`."""
        return self.spawn([lab.BLUECTL] + list(args), out, err, limit=limit)

    def close(self):
        for p in self.bg:
            if p.alive():
                p.signal(signal.SIGTERM)
        if any(p.alive() for p in self.bg):
            time.sleep(0.5)
        for p in self.bg:
            p.end()
        self.bg = []
        self.log.close()
