"""Issue 29's throughput, in bytes per second and CPU per byte, bluectl against a
C peer doing the same work, in the lab boot of Scripts/bench (`measure`, run by
lab-guest.py inside the guest) and its table and targets (`report`, run by
bench.py on the host):

  l2cap     LE L2CAP channel hci1 -> hci0: `bluectl l2cap connect < file` to
            `bluectl l2cap listen`, against l2cat.c (the same socket calls, no
            framing: l2test's -s/-r add their own frames, a per-SDU check and a
            syslog line per SDU, so they are not the same work). The receiver's
            stdout is a pipe the harness reads: bytes/s between the first and
            the last byte it sees, for both alike; CPU of sender + receiver from
            the first byte to their exit (set-up before it left out)
  start     notifications through StartNotify: `bluectl subscribe --format raw`
            against notify.c (libdbus); periph.py's stream, 20-byte values
  acquire   the same through AcquireNotify: `--notify-via acquire` against
            notify.c's acquire mode
  write     write without response through AcquireWrite: `bluectl write
            --file - --stream` against writestream.c (libdbus AcquireWrite,
            then the same socket calls: stdin read 64 KiB at a time, one
            send(2) per value of MTU - 3), WRITE_BYTES random bytes into
            periph.py's sink characteristic (write-without-response), which
            logs the bytes, writes, SHA-256 and the time from its first write
            to its last: bytes/s over that span (the same for both tools),
            the writer's CPU from the moment it began reading stdin (the
            harness's pipe first drained) to its exit, over the bytes (and
            apart, the part after the harness closed the pipe: the input's
            last 64 KiB, the wait until bluetoothd has read the socket, the
            clean-up, the exit); then one stream of each tool under perf, not
            counted, reported for that window alone (diag-write-perf.txt,
            diag-write-C-perf.txt; the whole process in *.whole), as one l2cap
            transfer is (diag-l2cap-*-perf.txt)
Then, not counted, one l2cap transfer and one write stream of each tool under
`strace -f -c`: the system calls each makes for the same bytes
(diag-MODE-TOOL-ROLE-strace.txt).
CPU times: each process's CPU-time clock at a window's start (to the ns,
procfs.cpu_s), its rusage at its exit.
Targets: bluectl's bytes/s >= 0.95 x the C peer's, its CPU per byte <= 1.2 x."""
import hashlib
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import time

MODES = (  # (mode, bluectl's row, the C peer's row)
    ("l2cap", "bluectl l2cap connect -> listen", "C l2cat.c connect -> listen"),
    ("start", "bluectl subscribe --format raw", "C libdbus StartNotify (notify.c)"),
    ("acquire", "bluectl --notify-via acquire (raw)", "C libdbus AcquireNotify (notify.c)"),
    ("write", "bluectl write --stream (AcquireWrite)", "C AcquireWrite (writestream.c)"),
)
TOOLS = {m[0]: m[1:] for m in MODES}
VALUE_BYTES = 20  # periph.py's stream values
SINK = "b1ec7100-0000-4000-8000-000000000005"  # periph.py's write-without-response sink


# ------------------------------------------------------------------ in the guest
def measure(h, size, values, writes, reps):
    """`h`: lab-guest.py's module (its helpers and live globals)."""
    out = h.RESULTS["throughput"] = {"size": size, "values": values, "writes": writes, "reps": reps, "runs": []}
    data = os.path.join("/tmp", "throughput.bin")  # the guest's tmpfs (LAB_OUT is 9p)
    with open(data, "wb") as f:
        f.write(os.urandom(size))
    with open(data, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    h.ensure_connected()
    # BENCH_COMPARE's binary (the code before a change) runs the same transfers, as a third row
    tools = ("bluectl", "C") + (("compare",) if h.COMPARE else ())
    for rep in range(reps):
        for tool in (tools if rep % 2 == 0 else tools[::-1]):
            out["runs"].append(l2cap_run(h, tool, data, size, digest, 0x93 + rep * 3 + tools.index(tool), rep))
            h.save()
    def l2cap_under_perf():
        diagnose_l2cap(h, data, size, digest, 0x93 + reps * 3)
    h.diagnosis(l2cap_under_perf)
    def l2cap_syscalls():
        diagnose_syscalls(h, "l2cap", lambda tool, wrap, rep: l2cap_run(h, tool, data, size, digest, 0x93 + reps * 3 + 1 + rep, "strace", wrap))
    h.diagnosis(l2cap_syscalls)
    stream = os.path.join("/tmp", "throughput-write.bin")
    with open(stream, "wb") as f:
        f.write(os.urandom(writes))
    with open(stream, "rb") as f:
        stream_digest = hashlib.sha256(f.read()).hexdigest()
    for rep in range(reps):
        # which tool goes first alternates, round by round
        for tool in (tools if rep % 2 == 0 else tools[::-1]):
            h.ensure_connected()
            out["runs"].append(write_stream_run(h, tool, stream, writes, stream_digest, rep))
            h.save()
    def write_under_perf():
        diagnose_write(h, stream, writes, stream_digest)
    h.diagnosis(write_under_perf)
    def write_syscalls():
        def run(tool, wrap, rep):
            h.ensure_connected()
            return write_stream_run(h, tool, stream, writes, stream_digest, "strace", wrap["connect"])
        diagnose_syscalls(h, "write", run)
    h.diagnosis(write_syscalls)
    # AcquireNotify last: bluetoothd 5.66 has segfaulted here after an AcquireNotify socket closed
    for mode in ("start", "acquire"):
        names = TOOLS[mode]
        consumers = [c for c in h.notify_consumers(values) if c[0] in names]
        for rep in range(reps):
            for name, argv, parse, ready, btctl in consumers:
                r = h.run_notify(name, argv, values, parse, ready, btctl, tag="-t%d" % rep)
                out["runs"].append(dict(r, mode=mode, rep=rep))
                h.save()


def diagnose_l2cap(h, data, size, digest, psm):
    """Not counted: one bluectl transfer with sender and receiver under perf
    (cpu-clock, call graphs): where bluectl's CPU per byte goes."""
    perf = shutil.which("perf")
    if not (perf and h.BLUECTL):
        return
    files = {role: os.path.join(h.WORK, "perf-l2cap-%s.data" % role) for role in ("listen", "connect")}
    wrap = {role: [perf, "record", "-q", "-F", "1000", "-e", "cpu-clock", "-g", "-o", f, "--"]
            for role, f in files.items()}
    r = l2cap_run(h, "bluectl", data, size, digest, psm, "perf", wrap)
    h.RESULTS["throughput"]["diagnostic"] = dict(r, tool="(bluectl l2cap under perf)")
    for role, f in files.items():
        h.perf_report(perf, f, os.path.join(h.WORK, "diag-l2cap-%s-perf.txt" % role))


def diagnose_syscalls(h, mode, run):
    """Not counted: one run of each tool under `strace -f -c` (every thread,
    the whole process): how many system calls each makes for the same bytes,
    and which (diag-MODE-TOOL-ROLE-strace.txt; ROLE: connect is the sender,
    listen the L2CAP receiver)."""
    strace = shutil.which("strace")
    if not (strace and h.BLUECTL):
        return
    for i, tool in enumerate(("bluectl", "C")):
        files = {role: os.path.join(h.WORK, "diag-%s-%s-%s-strace.txt" % (mode, tool, role)) for role in ("listen", "connect")}
        r = run(tool, {role: [strace, "-f", "-c", "-o", f] for role, f in files.items()}, i)
        h.RESULTS["throughput"].setdefault("syscall_diagnostics", []).append(dict(r, tool="(%s %s under strace -c)" % (tool, mode)))


def diagnose_write(h, data, size, digest):
    """Not counted: one stream of each tool, bluectl's and writestream.c, under
    perf (cpu-clock, call graphs, CLOCK_MONOTONIC time stamps), reported for
    the bench's CPU window alone (from the harness's mark, the writer reading
    stdin, to the exit) and for the whole process: where the CPU per byte
    goes, against the same window of the C peer."""
    perf = shutil.which("perf")
    if not (perf and h.BLUECTL):
        return
    for tool, name in (("bluectl", "diag-write-perf.txt"), ("C", "diag-write-C-perf.txt")):
        f = os.path.join(h.WORK, "perf-write-%s.data" % tool)
        h.ensure_connected()
        r = write_stream_run(h, tool, data, size, digest, "perf",
                             [perf, "record", "-q", "-F", "1000", "-e", "cpu-clock", "-g", "-k", "CLOCK_MONOTONIC",
                              "-o", f, "--"])
        h.RESULTS["throughput"].setdefault("write_diagnostics", []).append(dict(r, tool="(%s write stream under perf)" % tool))
        out = os.path.join(h.WORK, name)
        if r.get("t0_monotonic"):
            window = "%.6f," % r["t0_monotonic"]
            with open(out, "w") as w:
                for args in (["--no-children", "--sort", "comm,dso", "-g", "none"],
                             ["--no-children", "--sort", "symbol", "-g", "none"],
                             ["--children", "--sort", "symbol", "-g", "none"]):
                    w.write("### the window alone (from %s s): perf report %s\n" % (window, " ".join(args)))
                    rr = h.sh([perf, "report", "-i", f, "--stdio", "--percent-limit", "0.5", "--time", window] + args,
                              timeout=300)
                    w.write(rr.stdout[:60000] + rr.stderr[-2000:] + "\n")
        h.perf_report(perf, f, out + ".whole")


def l2cap_run(h, tool, data, size, digest, psm, rep, wrap=None):
    """One transfer of the file `data` (size bytes) hci1 -> hci0 on `psm`
    (`wrap`: a command prefix per role, listen and connect: a diagnostic's)."""
    c = os.path.join(h.CBIN, "l2cat")
    name = "%s l2cap connect -> listen" % h.COMPARE_NAME if tool == "compare" else TOOLS["l2cap"][tool == "C"]
    if tool in ("bluectl", "compare"):
        binary = h.COMPARE if tool == "compare" else h.BLUECTL
        listen = [binary, "l2cap", "listen", "--adapter", h.ENV.get("PERIPHERAL", "hci0"), "0x%04x" % psm,
                  "--no-stdin", "--json"]
        send = [binary, "l2cap", "--adapter", h.CENTRAL, "connect", h.PERIPH_ADDR, "0x%04x" % psm, "--json"]
        ready = re.compile(r'"event": ?"listening"')
    else:
        listen = [c, "listen", h.PERIPH_ADDR, str(psm)]
        send = [c, "connect", h.ENV["CENTRAL_ADDR"], h.PERIPH_ADDR, str(psm)]
        ready = re.compile(r"l2cat: listening")
    if wrap:
        listen, send = wrap["listen"] + listen, wrap["connect"] + send
    res = {"mode": "l2cap", "tool": name, "rep": rep, "n": size, "psm": psm, "argv": " ".join(send)}
    base = os.path.join(h.WORK, "throughput-l2cap-%s-%s" % (tool, rep))
    lerr_path, serr_path = base + "-listen.err", base + "-connect.err"
    lerr, serr = open(lerr_path, "wb"), open(serr_path, "wb")
    listener = subprocess.Popen(listen, stdout=subprocess.PIPE, stderr=lerr, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    sender = None
    try:
        if not h.wait(lambda: ready.search(open(lerr_path, errors="replace").read()) or listener.poll() is not None,
                      60, "%s listening" % name, 0.05) or listener.poll() is not None:
            res["error"] = "the listener never listened (exit %s)" % listener.poll()
            return res
        with open(data, "rb") as stdin:
            sender = subprocess.Popen(send, stdin=stdin, stdout=subprocess.DEVNULL, stderr=serr, start_new_session=True)
        sha, got, first, first_bytes, last, cpu0 = hashlib.sha256(), 0, None, 0, None, {}
        chunks = []  # kept to be written out when the transfer is not intact
        fd, end = listener.stdout.fileno(), time.monotonic() + 300
        while time.monotonic() < end:
            if not select.select([fd], [], [], 1.0)[0]:
                continue
            chunk = os.read(fd, 1 << 16)
            now = time.perf_counter()
            if not chunk:
                break
            if first is None:
                first, first_bytes = now, len(chunk)
                cpu0 = {"sender": h.proc_cpu(sender.pid), "receiver": h.proc_cpu(listener.pid)}
            sha.update(chunk)
            chunks.append(chunk)
            got += len(chunk)
            last = now
        for role, p in (("sender", sender), ("receiver", listener)):
            ru = reap(p, 60)
            res[role + "_rc"] = p.returncode
            if ru is not None:
                res[role + "_cpu_s"] = ru.ru_utime + ru.ru_stime
        res.update(received=got, intact=got == size and sha.hexdigest() == digest)
        if first is not None and last > first:
            res["window_s"] = last - first
            res["bytes_per_s"] = (got - first_bytes) / (last - first)
            cpus = [res.get(r + "_cpu_s", 0) - (cpu0.get(r) or 0) for r in ("sender", "receiver")]
            res["sender_transfer_cpu_s"], res["receiver_transfer_cpu_s"] = cpus
            res["cpu_per_byte_us"] = sum(cpus) / got * 1e6 if got else None
        if not res["intact"]:
            res["error"] = "received %d of %d bytes%s" % (got, size, "" if got != size else ", content differs")
            # both kept, to be compared: which SDUs went missing, moved or came twice
            res["kept"] = [base + "-received.bin", base + "-sent.bin"]
            with open(res["kept"][0], "wb") as f:
                f.writelines(chunks)
            shutil.copyfile(data, res["kept"][1])
    finally:
        for p in (sender, listener):
            if p is not None and p.poll() is None:
                kill_group(p)
                p.wait()
        lerr.close()
        serr.close()
    h.log("throughput %-36s rep %s: %s bytes in %s s = %s B/s, CPU/byte %s us (sender %s s, receiver %s s)%s" % (
        name, rep, res.get("received"), "%.2f" % res["window_s"] if res.get("window_s") else "?",
        "%.0f" % res["bytes_per_s"] if res.get("bytes_per_s") else "?",
        "%.3f" % res["cpu_per_byte_us"] if res.get("cpu_per_byte_us") else "?",
        res.get("sender_transfer_cpu_s"), res.get("receiver_transfer_cpu_s"),
        " ERROR " + res["error"] if res.get("error") else ""))
    return res


def kill_group(p):
    """Kills `p` and what it started (each run is a session of its own): under a
    diagnostic's perf or strace the tool is their child, and must not outlive
    the run (a writer would hold AcquireWrite into the next bench)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def reap(p, timeout):
    """Waits for `p` (killed after `timeout` s): its rusage, None when killed."""
    end = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return ru
        if time.monotonic() > end:
            kill_group(p)
            _, status, _ = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            return None
        time.sleep(0.02)


def sink_summaries(h):
    """periph.py's sink lines so far: (bytes, writes, first write's bytes, seconds first to last, sha256)."""
    try:
        with open(os.path.join(h.OUT, "periph.log"), errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    return [(int(m[0]), int(m[1]), int(m[2]), float(m[3]), m[4]) for m in
            re.findall(r"sink: (\d+) bytes in (\d+) writes, (\d+) first, ([\d.]+) s first to last, sha256 ([0-9a-f]+)", text)]


def write_stream_run(h, tool, data, size, digest, rep, wrap=None):
    """One stream of the file `data` (size bytes) into the sink characteristic
    through AcquireWrite: the harness feeds the writer's stdin from a pipe and
    takes its CPU when the pipe first drains (the writer's set-up is done).
    `wrap`: a command prefix (a diagnostic's perf)."""
    name = "%s write --stream" % h.COMPARE_NAME if tool == "compare" else TOOLS["write"][tool == "C"]
    if tool in ("bluectl", "compare"):
        binary = h.COMPARE if tool == "compare" else h.BLUECTL
        argv = [binary, "write", h.PERIPH_ADDR, SINK, "--file", "-", "--stream", "--json", "--adapter", h.CENTRAL]
    else:
        argv = [os.path.join(h.CBIN, "writestream"), h.PATHS[SINK]]
    argv = (wrap or []) + argv
    res = {"mode": "write", "tool": name, "rep": rep, "n": size, "argv": " ".join(argv)}
    base = os.path.join(h.WORK, "throughput-write-%s-%s" % (tool, rep))
    before = len(sink_summaries(h))
    with open(data, "rb") as f:
        payload = f.read()
    err = open(base + ".err", "wb")
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=open(base + ".out", "wb"), stderr=err, start_new_session=True)
    try:
        fd = p.stdin.fileno()
        os.set_blocking(fd, False)
        off, cpu0, pipe_room = 0, None, None
        end = time.monotonic() + 300
        while off < len(payload) and time.monotonic() < end and p.poll() is None:
            if not select.select([], [fd], [], 1.0)[1]:
                continue
            if off > 0 and cpu0 is None:
                cpu0 = h.proc_cpu(p.pid)   # the pipe drained: the writer reads
                res["t0_monotonic"] = time.monotonic()  # the window's start (perf -k CLOCK_MONOTONIC's clock)
            try:
                off += os.write(fd, payload[off:off + (1 << 16)])
            except BlockingIOError:
                continue
            except BrokenPipeError:
                break
        p.stdin.close()
        # the input all in the pipe: what follows is at most a pipe's last 64 KiB,
        # the wait until bluetoothd has read the socket, the clean-up and the exit
        cpu_in = h.proc_cpu(p.pid)
        ru = reap(p, 120)
        res["rc"] = p.returncode
        if ru is not None:
            res["cpu_s"] = ru.ru_utime + ru.ru_stime
    finally:
        if p.poll() is None:
            kill_group(p)
            p.wait()
        err.close()
    # bluetoothd reads the socket faster than the link takes Write Commands (it queues
    # them without bound), so the writer can exit long before the sink has the last one
    h.wait(lambda: len(sink_summaries(h)) > before, 180, "the sink's summary", 0.1)
    got = sink_summaries(h)[before:]
    if got:
        total, writes, first_bytes, span, sha = got[0]
        res.update(received=total, writes=writes, intact=total == size and sha == digest)
        if span > 0:
            res["window_s"] = span
            res["bytes_per_s"] = (total - first_bytes) / span
        res["setup_cpu_s"] = cpu0
        if cpu0 is not None and res.get("cpu_s") is not None and total:
            res["transfer_cpu_s"] = res["cpu_s"] - cpu0
            if cpu_in is not None:
                res["tail_cpu_s"] = res["cpu_s"] - cpu_in
            res["cpu_per_byte_us"] = res["transfer_cpu_s"] / total * 1e6
        if len(got) > 1:
            res["note"] = "the sink logged %d summaries (a pause of 0.5 s in the stream)" % len(got)
    else:
        res.update(received=0, intact=False)
    if p.returncode != 0 or not res.get("intact"):
        res["error"] = "exit %s, the sink got %s of %d bytes%s" % (
            p.returncode, res.get("received"), size, ", content differs" if res.get("received") == size else "")
    h.log("throughput %-36s rep %s: %s bytes in %s writes, %s s = %s B/s, CPU/byte %s us (%s s, %s s after the input's end)%s" % (
        name, rep, res.get("received"), res.get("writes"), "%.2f" % res["window_s"] if res.get("window_s") else "?",
        "%.0f" % res["bytes_per_s"] if res.get("bytes_per_s") else "?",
        "%.3f" % res["cpu_per_byte_us"] if res.get("cpu_per_byte_us") else "?",
        "%.3f" % res["transfer_cpu_s"] if res.get("transfer_cpu_s") is not None else "?",
        "%.3f" % res["tail_cpu_s"] if res.get("tail_cpu_s") is not None else "?",
        " ERROR " + res["error"] if res.get("error") else ""))
    return res


# ------------------------------------------------------------------ on the host
def _figures(r):
    """(bytes/s, CPU µs per byte) of one run of any mode."""
    if r["mode"] in ("start", "acquire"):
        rate, cpu = r.get("rate"), r.get("cpu_per_value_us")
        return (rate * VALUE_BYTES if rate else None), (cpu / VALUE_BYTES if cpu else None)
    return r.get("bytes_per_s"), r.get("cpu_per_byte_us")


def _ok(r):
    if r["mode"] in ("start", "acquire"):
        return bool(r.get("valid"))
    return not r.get("error")


def report(tp, target, x):
    """The table and issue 29's targets (`target`, `x`: bench.py's verdict and ratio helpers)."""
    if not tp:
        return []
    L = ["", f"Throughput (issue 29), bluectl against a C peer doing the same work, {tp['reps']} runs each, "
         f"interleaved; median (min–max). L2CAP: {tp['size']:,} random bytes hci1 → hci0 per run, bytes/s between "
         "the first and the last byte the harness reads from the receiver's stdout, CPU of sender + receiver from "
         f"the first byte to their exit. Notifications: bursts of {tp['values']:,} values of {VALUE_BYTES} bytes "
         "(the notify table's measure: rate between the first and last value, consumer CPU from the burst's start). "
         f"Write without response: {tp['writes']:,} random bytes per run through AcquireWrite into periph.py's sink "
         "characteristic, bytes/s between its first and last write, the writer's CPU from its first read of stdin "
         "to its exit; each stream checked whole by SHA-256.", "",
         "| mode | tool | ok runs | bytes/s | CPU per byte | lost / failed |", "|---|---|---|---|---|---|"]
    med = {}
    for mode, *tools in MODES:
        extra = sorted({r["tool"] for r in tp["runs"] if r.get("mode") == mode} - set(tools))  # BENCH_COMPARE's
        for tool in tools + extra:
            runs = [r for r in tp["runs"] if r.get("mode") == mode and r["tool"] == tool]
            if not runs:
                continue
            good = [r for r in runs if _ok(r)]
            figs = [_figures(r) for r in good]
            rates = sorted(f[0] for f in figs if f[0])
            cpus = sorted(f[1] for f in figs if f[1])
            med[(mode, tool)] = (statistics.median(rates) if rates else None, statistics.median(cpus) if cpus else None)
            if mode in ("start", "acquire"):
                bad = f"lost {sum(r.get('missing', r['n']) for r in runs)} values"
            elif mode == "l2cap":
                bad = f"{sum(1 for r in runs if r.get('error'))} runs short or differing"
            else:
                bad = f"{sum(1 for r in runs if r.get('error'))} runs short, differing or failed"
            span = lambda xs, f: f"{f(statistics.median(xs))} ({f(xs[0])}–{f(xs[-1])})" if xs else "–"
            L.append(f"| {mode} | {tool} | {len(good)}/{len(runs)} | {span(rates, lambda v: f'{v:,.0f}')} | "
                     f"{span(cpus, lambda v: f'{v:.3f} µs' if v < 10 else f'{v:,.0f} µs')} | {bad} |")
    L.append("")
    for mode, mine, peer in MODES:
        (br, bc), (cr, cc) = med.get((mode, mine), (None, None)), med.get((mode, peer), (None, None))
        rr = br / cr if br and cr else None
        L.append(target(f"throughput {mode}: bluectl " + (
            f"{br:,.0f} B/s = {x(rr, 0.95)} × {peer}'s {cr:,.0f} B/s (target ≥ 0.95)" if rr is not None else
            "bytes/s ? (no figure for bluectl or the C peer)"), rr is not None and rr >= 0.95))
        cr_ = bc / cc if bc and cc else None
        L.append(target(f"throughput {mode}: bluectl CPU/byte " + (
            f"{bc:.3f} µs = {x(cr_, 1.2)} × {peer}'s {cc:.3f} µs (target ≤ 1.2)" if cr_ is not None else
            "? (no figure for bluectl or the C peer)"), cr_ is not None and cr_ <= 1.2))
    return L
