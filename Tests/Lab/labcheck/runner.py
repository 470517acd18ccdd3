"""Registration, selection and the report of lab checks.

A check is a function of one argument, the Check context (check.py),
registered in run order with @lab_check:

    @lab_check('adapters_plain')
    def _(c):
        c.bl('adapters')
        c.expect_rc(0)

It passes when it returns, fails on an assertion (check(), c.fail(), an
expect_*) or any exception, and is skipped on c.skip(). Output: `PASS NAME`,
`FAIL NAME: why` (then the last lines of its log), `SKIP NAME: why`, and the
summary ends with exactly one line `N passed, M failed, K skipped`. A skip
fails the tier too (LAB_ALLOW_SKIPS=1, for a developer's exploratory run,
makes skips non-fatal; CI never sets it).

Two faults of the lab's stack, not of bluectl, are retried once each: a check
that fails while bluetoothd's log shows the emulated link's ATT stall
(KNOWN_STALL), and one that fails after bluetoothd 5.66 died by itself during
it (a segfault of its own: the same bluetoothd serves the lab's peripherals,
whose GATT applications go with it until the supervisor has brought them back,
so a check's peer vanished). The check is run once more, and the report says
so (`RETRIED NAME: ...`, then its second result). Checks that are about
living through bluetoothd's deaths (CRASH_TESTED) are never retried for one.
Any other failure is final. bluetoothd's deaths during a check are reported
as `CRASH during NAME` lines and counted.
"""
import fnmatch
import os
import re
import signal
import sys
import time
import traceback

from . import lab
from .check import Check, CheckSkipped
from .jsonlines import CheckFailed

REGISTRY = []   # (name, function), in run order

# bluetoothd's ATT transaction timeout (src/shared/att.c timeout_cb, logged
# through src/device.c gatt_debug with -d): the emulated link under TCG
# sometimes loses an ATT response and bluetoothd gives up on the request
# after 30 s (Tests/Lab/README.md, "The two retries").
KNOWN_STALL = re.compile(r'gatt_debug\(\) \(chan 0x[0-9a-f]+\) Operation timed out: 0x[0-9a-f]{2}')


# Checks whose subject is bluetoothd dying (on purpose or by itself), or not
# dying (extra_gateway_passive: the monitor that made 5.66 abort): a death
# during them is what they test, not a reason to run them again.
CRASH_TESTED = ('extra_stream_acquire', 'extra_subscribe_reconnect', 'two_devices_bluetoothd_segv', 'serve_bluetoothd_segv',
                'gateway_faults', 'extra_gateway_passive')


def wait_peripheral_back(mark, secs=120):
    """Until supervisor.log, after mark, has "peripheral ready again" after its
    last death (at most secs): True when it has."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        lines = supervisor_since(mark)
        deaths = [i for i, l in enumerate(lines) if 'restarting' in l]
        if not deaths or any('peripheral ready again' in l for l in lines[deaths[-1]:]):
            return True
        time.sleep(0.5)
    return False


def lab_check(name):
    """Register a check under NAME, after those registered before it."""
    def register(fn):
        if any(n == name for n, _ in REGISTRY):
            raise ValueError('two checks named ' + name)
        REGISTRY.append((name, fn))
        return fn
    return register


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _since(path, offset):
    try:
        with open(path, 'rb') as f:
            f.seek(offset)
            return f.read().decode('utf-8', 'replace')
    except OSError:
        return ''


def supervisor_mark():
    """Where supervisor.log ends now (for crashes_since)."""
    return _size(lab.SUPERVISOR_LOG)


def supervisor_since(mark):
    """supervisor.log's lines after mark."""
    return [l for l in _since(lab.SUPERVISOR_LOG, mark).splitlines() if l]


def crashes_since(mark):
    """bluetoothd's deaths after mark, less those a check caused on purpose
    (faults.bluetoothd_segv writes a "deliberate:" line first)."""
    lines = supervisor_since(mark)
    return (sum(1 for l in lines if re.search(r'bluetoothd .*restarting', l))
            - sum(1 for l in lines if ' deliberate: ' in l))


class Runner:
    def __init__(self, out=sys.stdout):
        self.out = out
        self.passed = self.failed = self.skipped = self.crashes = self.ran = 0
        self.skips, self.retried = [], []
        self.current = None
        os.makedirs(lab.CHECK_DIR, exist_ok=True)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)

    def say(self, line):
        print(line, file=self.out, flush=True)

    # Killed by the lab's time limit (SIGTERM from `timeout`): the check that
    # was running fails, and the summary line is still printed.
    def _on_term(self, *_):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if self.current is not None:
            self.say('FAIL %s: interrupted (the lab\'s time limit ran out)' % self.current.name)
            self.failed += 1
            self.current.close()
        self.summary()
        os._exit(124)

    def _attempt(self, name, fn):
        for f in os.listdir(lab.CHECK_DIR):
            if f.startswith(name + '.'):
                os.remove(os.path.join(lab.CHECK_DIR, f))
        c = Check(name)
        self.current = c
        why, rc = None, 0
        try:
            fn(c)
        except CheckFailed as e:
            why, rc = str(e), 1
        except CheckSkipped as e:
            why, rc = str(e), 77
        except Exception as e:   # a bug in the check, or output of an unexpected shape
            why, rc = '%s: %s' % (type(e).__name__, e), 1
            c.echo(traceback.format_exc())
        if why is not None:
            c.echo('%s: %s' % ('SKIP' if rc == 77 else 'FAIL', why))
        c.close()
        self.current = None
        return rc, why

    def run(self, name, fn):
        """Run one check (retried once after the known ATT stall) and report it."""
        self.ran += 1
        t0 = time.monotonic()
        btd0, sup0 = _size(lab.BTD_LOG), supervisor_mark()
        rc, why = self._attempt(name, fn)
        if rc not in (0, 77):
            stall = next((l for l in _since(lab.BTD_LOG, btd0).splitlines() if KNOWN_STALL.search(l)), None)
            died = crashes_since(sup0) if name not in CRASH_TESTED else 0
            if stall or died:
                cause = ('the known ATT stall during the check (%s)' % stall if stall else
                         'bluetoothd died by itself during the check (%s)' % ';'.join(supervisor_since(sup0)))
                if died and not wait_peripheral_back(sup0):
                    self.say('the supervisor did not bring the peripherals back within 120 s')
                self.say('RETRIED %s: %s; first failure: %s' % (name, cause, why))
                self.retried.append(name)
                first = os.path.join(lab.CHECK_DIR, 'first-attempt')
                os.makedirs(first, exist_ok=True)
                for f in os.listdir(lab.CHECK_DIR):
                    if f.startswith(name + '.'):
                        os.replace(os.path.join(lab.CHECK_DIR, f), os.path.join(first, f))
                rc, why = self._attempt(name, fn)
        with open(os.path.join(lab.CHECK_DIR, 'times.tsv'), 'a') as f:
            f.write('%s\t%d\t%.1f\n' % (name, rc, time.monotonic() - t0))
        n = crashes_since(sup0)
        if n > 0:
            self.say('CRASH during %s: bluetoothd died %d time(s) and was restarted: %s'
                     % (name, n, ';'.join(supervisor_since(sup0)) + ';'))
            self.crashes += n
        if rc == 0:
            self.say('PASS ' + name)
            self.passed += 1
        elif rc == 77:
            self.say('SKIP %s: %s' % (name, why or 'skipped'))
            self.skipped += 1
            self.skips.append(name)
        else:
            self.say('FAIL %s: %s' % (name, why or 'check exited with status %d' % rc))
            self.failed += 1
            with open(os.path.join(lab.CHECK_DIR, name + '.log'), encoding='utf-8', errors='replace') as f:
                for line in f.read().splitlines()[-int(os.environ.get('CONTEXT_LINES', '12')):]:
                    self.say('    | ' + line)

    def import_results(self, prefix, lines):
        """Count another runner's PASS/FAIL/SKIP lines as our own; its other
        lines are shown with a prefix so that only our summary line starts a
        line with a count."""
        for line in lines:
            for word in ('PASS', 'FAIL', 'SKIP'):
                if line.startswith(word + ' '):
                    rest = prefix + line[len(word) + 1:]
                    self.say('%s %s' % (word, rest))
                    if word == 'PASS':
                        self.passed += 1
                    elif word == 'FAIL':
                        self.failed += 1
                    else:
                        self.skipped += 1
                        self.skips.append(rest)
                    break
            else:
                self.say('    | ' + line)

    def summary(self):
        """The closing lines; True when nothing failed (and nothing was
        skipped, unless LAB_ALLOW_SKIPS=1)."""
        allow = os.environ.get('LAB_ALLOW_SKIPS', '0') == '1'
        if self.skipped:
            self.say('skipped %d: %s%s' % (self.skipped, ' '.join(s.split(':')[0] for s in self.skips),
                                           ' (allowed: LAB_ALLOW_SKIPS=1)' if allow else ' (a skip fails the tier)'))
        if self.retried:
            self.say('retried after the known ATT stall or a death of bluetoothd: ' + ' '.join(self.retried))
        if self.crashes:
            self.say('bluetoothd died %d time(s) during the checks (restarted by the supervisor; see CRASH lines)'
                     % self.crashes)
        self.say('%d passed, %d failed, %d skipped' % (self.passed, self.failed, self.skipped))
        return self.failed == 0 and (self.skipped == 0 or allow)


def selects(pattern, name):
    """Whether PATTERN (a shell glob) selects check NAME: soak_* and extra_*
    checks (minutes long, or hard on bluetoothd 5.66) only by a pattern that
    starts with soak_ / extra_ itself."""
    for prefix in ('soak_', 'extra_'):
        if name.startswith(prefix) and not pattern.startswith(prefix):
            return False
    return fnmatch.fnmatchcase(name, pattern)


def main(patterns, tier_checks):
    """Run the registered checks that PATTERNS select (default: the tier,
    which must be exactly tier_checks checks); exit status 0 only when all
    ran and passed. Every pattern must select a check: a tier that ran
    nothing proves nothing."""
    patterns = patterns or ['*']
    r = Runner()
    if not lab.BLUECTL or not os.access(lab.BLUECTL, os.X_OK):
        r.say('FAIL setup: BLUECTL=%s is not executable' % lab.BLUECTL)
        r.say('0 passed, 1 failed')
        return 1
    chosen = [(n, fn) for n, fn in REGISTRY if any(selects(p, n) for p in patterns)]
    for name, fn in chosen:
        r.run(name, fn)
    for p in patterns:
        if not any(selects(p, n) for n, _ in REGISTRY):
            r.say("FAIL selection: no check matches '%s'" % p)
            r.failed += 1
    if r.ran != len(chosen):
        r.say('FAIL selection: %d checks selected, %d ran' % (len(chosen), r.ran))
        r.failed += 1
    elif patterns == ['*'] and len(chosen) != tier_checks:
        r.say('FAIL selection: the tier ran %d checks, expected %d (update TIER_CHECKS with the checks)'
              % (len(chosen), tier_checks))
        r.failed += 1
    return 0 if r.summary() else 1
