"""One lab boot running a guest script of the benchmarks (gateway-guest.py,
proxy-guest.py), for their host halves: the JSON it wrote and its logs."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def boot(name, script, args, timeout="1500"):
    """Boots the lab once (`Scripts/lab run --fast`, which waits on the lab lock),
    runs Scripts/bench.d/SCRIPT ARGS in it: (the NAME.json it wrote, its log
    folder .lab/bench/NAME-DATE, the run's status). No NAME.json: exits."""
    out = os.path.join(REPO, ".lab", "bench", time.strftime(name + "-%Y%m%d-%H%M%S"))
    os.makedirs(out)
    argv = [os.path.join(REPO, "Scripts", "lab"), "run", "--fast", "-q",
            "--timeout", os.environ.get("BENCH_LAB_TIMEOUT", timeout), "--out", out, os.path.join(HERE, script)] + args
    print(f"(one lab boot; logs in {os.path.relpath(out, REPO)})", flush=True)
    rc = subprocess.run(argv, cwd=REPO, stdout=sys.stderr).returncode
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        sys.exit(f"bench: the lab run failed (status {rc}); see {out}/check.log and lab.log")
    with open(path) as f:
        return json.load(f), out, rc


# what a table's peak RSS column is, for its footnote
PEAK_RSS_NOTE = ("peak RSS: the largest Rss of /proc/PID/smaps_rollup read every 0.5 s, each read exact "
                 "(the kernel's VmHWM, in brackets, lags by up to MBs)")


def peak_rss(r):
    """A run's peak RSS for a table: the sampled exact peak (procfs.PeakRss), and the kernel's
    VmHWM in brackets when the run recorded it (runs before 2026-11-28 16:00 UTC did not)."""
    text = f"{r['peak_rss_kib'] / 1024:.1f} MiB"
    return text + (f" ({r['vmhwm_kib'] / 1024:.1f})" if r.get("vmhwm_kib") else "")
