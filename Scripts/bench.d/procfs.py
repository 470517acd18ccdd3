"""What /proc says of a process, for the benchmarks on the host (bench.py) and in
the lab guest (lab-guest.py, serve-notify.py, gateway-guest.py)."""
import os
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """User + system seconds of a running process, None once it is gone: its
    CPU-time clock (clock_getcpuclockid's, to the nanosecond: the sum that
    wait4's rusage gives at its exit), else fields 14 and 15 of its stat
    (whole clock ticks, 10 ms: a window's start read from them is late by up
    to a tick, which weighs on a transfer of 50 ms)."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    except (OSError, OverflowError):
        pass
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError):
        return None


def _kib(path, key):
    """The first number (KiB) of the line of `path` that starts with `key`, None when no
    line does."""
    with open(path) as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return None


def peak_rss_kib(pid):
    """The process's peak resident set (VmHWM), in KiB; 0 when /proc does not say."""
    return _kib("/proc/%d/status" % pid, "VmHWM:") or 0


def rss_kib(pid):
    """The process's resident set now, exact (the Rss of /proc/PID/smaps_rollup, which walks
    its page tables), in KiB; None once it is gone. Not VmRSS/VmHWM: on the lab's kernel
    (6.1) those come from per-thread counters that are folded in every 64 page faults, so a
    process with several threads reads low by up to MBs (`bluectl gateway`: VmHWM 17.4 MiB
    while its smaps summed 18.9 MiB, docs/benchmarks.md)."""
    try:
        return _kib("/proc/%d/smaps_rollup" % pid, "Rss:")
    except OSError:
        return None


class PeakRss:
    """The largest `rss_kib` of a process, read every `interval` seconds on a thread of its
    own until `stop()`, which returns it (KiB; 0 when never read). A peak between two
    reads is missed: the figure is a floor, each read exact."""

    def __init__(self, pid, interval=0.5):
        self.pid, self.interval, self.peak = pid, interval, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            kib = rss_kib(self.pid)
            if kib is None:
                return
            self.peak = max(self.peak, kib)
            if self._done.wait(self.interval):
                return

    def stop(self):
        self._done.set()
        self._thread.join()
        kib = rss_kib(self.pid)
        if kib is not None:
            self.peak = max(self.peak, kib)
        return self.peak
