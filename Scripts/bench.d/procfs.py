"""What /proc says of a process, for the benchmarks on the host (bench.py) and in
the lab guest (lab-guest.py, serve-notify.py, gateway-guest.py)."""
import os
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


def peak_rss_kib(pid):
    """The process's peak resident set (VmHWM), in KiB; 0 when /proc does not say."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0
