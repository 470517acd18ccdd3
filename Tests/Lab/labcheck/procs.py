"""Processes a check runs: in the foreground with a time limit, or in the
background (a subscriber, serve, a scan), each ended when its check ends."""
import os
import signal
import subprocess
import threading
import time


def _default_signals():
    # like sigrun.py and `env --default-signal`: the child gets SIGINT and
    # SIGTERM at their defaults whatever the runner inherited
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def status(rc):
    """The status a shell would see: 128+N when signal N killed it."""
    return 128 - rc if rc < 0 else rc


class Proc:
    """A process with its stdout/stderr in files. With a limit it is sent
    SIGTERM after `limit` seconds and SIGKILL 5 s later, and its status is
    then 124, as coreutils `timeout -k 5 LIMIT` would report."""

    def __init__(self, argv, out, err, limit=None, stdin=None, env=None):
        self.argv, self.out, self.err = argv, out, err
        self.timed_out = False
        self.t0 = time.monotonic()
        with open(out, 'wb') as o, open(err, 'wb') as e:
            self.p = subprocess.Popen(argv, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                      stdout=o, stderr=e, preexec_fn=_default_signals, env=env)
        self.pid = self.p.pid
        self._timer = None
        if limit is not None:
            self._timer = threading.Timer(limit, self._expire)
            self._timer.daemon = True
            self._timer.start()

    def _expire(self):
        if self.p.poll() is None:
            self.timed_out = True
            self.signal(signal.SIGTERM)
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)

    def signal(self, sig):
        try:
            self.p.send_signal(sig)
        except ProcessLookupError:
            pass

    def alive(self):
        return self.p.poll() is None

    def wait(self, secs=None):
        """The exit status (124 when the limit ran out); with secs, at most
        that long: still running then, it is killed and the status is 124."""
        try:
            rc = self.p.wait(secs)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.p.wait()
            return 124
        if self._timer:
            self._timer.cancel()
        return 124 if self.timed_out else status(rc)

    def end(self):
        """SIGTERM, then SIGKILL after 0.5 s: what a check leaves running."""
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                self.p.wait(0.5)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.p.wait()
        if self._timer:
            self._timer.cancel()

    def read(self):
        return read_text(self.out)


def read_text(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            return f.read()
    except OSError:
        return ''


def head(path, n):
    """The first n characters of a file ('' when absent)."""
    return read_text(path)[:n]


def exists(path):
    return os.path.exists(path)
