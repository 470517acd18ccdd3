#!/usr/bin/python3 -u
"""The lab half of Scripts/bench, run inside ONE lab boot (Scripts/lab run --fast).

bluectl and its peers side by side against the same bluetoothd:
  reads    one-shot read of a characteristic of an already-connected device,
           process start -> value printed (and -> exit), CPU of the process
  notify   a burst of N sequence-numbered 20-byte notifications from the lab's
           stream (Scripts/lab.d/guest/periph.py): received, loss, order, rate
           between the first and the last value, consumer CPU per value; and the
           whole process's CPU (start-up to exit: process_cpu_s)
Writes $LAB_OUT/bench.json (read by Scripts/bench.d/bench.py on the host) and the
consumers' output under $LAB_OUT/bench/.

  devices  two peripherals streaming paced bursts at once (hci0, hci2): bluectl on
           each alone and on both in one process, python3-dbus with one StartNotify
           consumer per device: per device loss, order, rate; CPU per value
  reads also get a breakdown: a few runs of bluectl, busctl and the C client under
  strace, split into stages by syscalls (read_breakdown)
  throughput  issue 29: bytes/s and CPU per byte of bluectl against C peers over an
           L2CAP channel, StartNotify, AcquireNotify and write without response
           (Scripts/bench.d/throughput.py)

usage: lab-guest.py [--reads N] [--notify N[,N...]] [--notify-reps R] [--big N]
                    [--cbin DIR] [--venv PYTHON] [--only reads,notify,devices] [--consumers REGEX]
                    [--devices N] [--devices-ms MS] [--devices-reps R] [--breakdown RUNS]
                    [--throughput BYTES,VALUES,WRITE_BYTES,REPS]
Tools missing in this environment become rows marked "not available".
"""
import json
import os
import re
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import dbus
from procfs import cpu_s as proc_cpu  # throughput.py calls it as the harness's proc_cpu

BLUEZ = "org.bluez"
PROPS = "org.freedesktop.DBus.Properties"
DEV_IF, CHR_IF = "org.bluez.Device1", "org.bluez.GattCharacteristic1"
STREAM = "b1ec7100-0000-4000-8000-000000000001"
CONTROL = "b1ec7100-0000-4000-8000-000000000002"
BATTERY = "00002a19-0000-1000-8000-00805f9b34fb"

ENV = os.environ
BLUECTL, CENTRAL, PERIPH_ADDR = ENV.get("BLUECTL", ""), ENV.get("CENTRAL", "hci1"), ENV["PERIPH_ADDR"]
REPO, OUT = ENV.get("REPO", "."), ENV.get("LAB_OUT", "/tmp")
WORK = os.path.join(OUT, "bench")
os.makedirs(WORK, exist_ok=True)
PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers")
PY = "/usr/bin/python3"
T0 = time.monotonic()


def opt(name, default):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


READS = int(opt("--reads", "12"))
NOTIFY_NS = [int(x) for x in opt("--notify", "3000").split(",") if x]
NOTIFY_REPS = int(opt("--notify-reps", "2"))
BIG = int(opt("--big", "0"))
CBIN = os.path.join(REPO, opt("--cbin", ".lab/bench-bin"))
VENV_PY = os.path.join(REPO, opt("--venv", ".lab/venv-bleak/bin/python"))
ONLY = opt("--only", "")  # comma-separated parts: reads, notify, devices, throughput (default: all four)
PARTS = set(ONLY.split(",")) if ONLY else {"reads", "notify", "devices", "throughput"}
# L2CAP bytes per transfer, notifications per burst, one-shot writes per run, runs of each
THROUGHPUT = [int(x) for x in opt("--throughput", "2097152,3000,524288,3").split(",")]
DEVICES_N = int(opt("--devices", "1000"))  # values per device in the two-device runs; 0: none
DEVICES_MS = int(opt("--devices-ms", "2"))  # their pace: one value every MS ms on each device
DEVICES_REPS = int(opt("--devices-reps", "3"))
BREAKDOWN_RUNS = int(opt("--breakdown", "5"))  # one-shot reads under strace per tool; 0: none
CONSUMERS = re.compile(opt("--consumers", ""), re.I)  # only notification consumers whose name matches
# a second bluectl (a path in the repository) read and subscribed beside the first, in the same boot,
# its rows named after its file ("bluectl-87ff39f read", …): before and after a change, side by side
COMPARE = os.path.join(REPO, opt("--compare", "")) if opt("--compare", "") else ""
COMPARE_NAME = os.path.basename(COMPARE)
BTCTL = shutil.which("bluetoothctl")
STDBUF = shutil.which("stdbuf")
BUSCTL = shutil.which("busctl")


def log(*a):
    print("[bench %7.1fs]" % (time.monotonic() - T0), *a, flush=True)


bus = dbus.SystemBus()


def dev_path(addr):
    return "/org/bluez/%s/dev_%s" % (CENTRAL, addr.replace(":", "_"))


DEV_PATH = dev_path(PERIPH_ADDR)
RESULTS = {"env": {}, "reads": [], "notify": [], "notes": [], "reconnects": 0}


def prop(path, iface, name, default=None):
    try:
        return dbus.Interface(bus.get_object(BLUEZ, path), PROPS).Get(iface, name)
    except dbus.exceptions.DBusException:
        return default


def wait(cond, timeout, what, step=0.1, quiet=False):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    if not quiet:
        log("timeout (%ss) waiting for %s" % (timeout, what))
    return False


def chr_paths(device=DEV_PATH):
    objs = dbus.Interface(bus.get_object(BLUEZ, "/"), "org.freedesktop.DBus.ObjectManager").GetManagedObjects()
    found = {}
    for path, ifaces in objs.items():
        if str(path).startswith(device + "/") and CHR_IF in ifaces:
            found[str(ifaces[CHR_IF]["UUID"]).lower()] = str(path)
    return found


PATHS = {}


def connected(device=DEV_PATH):
    return bool(prop(device, DEV_IF, "Connected", False)) and bool(prop(device, DEV_IF, "ServicesResolved", False))


def ensure_connected(first=False):
    global PATHS
    if not connected():
        if not first:
            RESULTS["reconnects"] += 1
        time.sleep(1)  # let a disconnect settle (quick reconnect cycles have crashed this lab's kernel)
        for attempt in range(3):
            try:
                dbus.Interface(bus.get_object(BLUEZ, DEV_PATH), DEV_IF).Connect(timeout=60)
            except dbus.exceptions.DBusException as e:
                log("Connect: %s" % e.get_dbus_name())
            if wait(connected, 30, "Connected + ServicesResolved"):
                break
        else:
            raise SystemExit("bench: cannot connect to %s" % PERIPH_ADDR)
    PATHS = chr_paths()


def sh(argv, timeout=60):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x01|\x02|\r")


def strip(text):
    return ANSI.sub("", text)


# ------------------------------------------------------------------ reads
def run_read(argv):
    """Fork/exec argv with stdout on a pipe: seconds to the first output line (the
    value), seconds to exit, CPU seconds (getrusage of the child), exit status."""
    r, w = os.pipe()
    err = open(os.path.join(WORK, "reads.stderr"), "a")
    err.write("$ %s\n" % " ".join(argv))
    err.flush()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        os.dup2(err.fileno(), 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.execv(argv[0], argv)
    os.close(w)
    buf, t_value, value = b"", None, None
    end = t0 + 90
    while True:
        left = end - time.perf_counter()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            break
        if not select.select([r], [], [], left)[0]:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
        if t_value is None and b"\n" in buf:
            t_value = time.perf_counter()
            value = buf.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    _, status, ru = os.wait4(pid, 0)
    t_exit = time.perf_counter()
    os.close(r)
    err.close()
    rc = os.waitstatus_to_exitcode(status)
    res = {"value_s": None if t_value is None else t_value - t0, "exit_s": t_exit - t0,
           "cpu_s": ru.ru_utime + ru.ru_stime, "rc": rc, "value": value}
    if t_value is None or rc != 0:
        res["out"] = buf[-2000:].decode("utf-8", "replace")
    return res


def read_tools(notes=True):
    tools = []
    dev = PERIPH_ADDR
    if BLUECTL:
        tools.append(("bluectl read", lambda: [BLUECTL, "read", dev, "2a19", "--adapter", CENTRAL], {}))
    if COMPARE:
        tools.append(("%s read" % COMPARE_NAME, lambda: [COMPARE, "read", dev, "2a19", "--adapter", CENTRAL], {}))
    if os.access(os.path.join(CBIN, "readvalue"), os.X_OK):
        tools.append(("C libdbus (readvalue.c)", lambda: [os.path.join(CBIN, "readvalue"), PATHS[BATTERY]], {}))
    elif notes:
        RESULTS["notes"].append("C libdbus read: not available (%s/readvalue missing)" % CBIN)
    if BUSCTL:
        tools.append(("busctl call", lambda: [BUSCTL, "call", BLUEZ, PATHS[BATTERY], CHR_IF, "ReadValue", "a{sv}", "0"], {}))
    tools.append(("python3-dbus", lambda: [PY, os.path.join(PEERS, "py_read.py"), PATHS[BATTERY]], {}))
    if BLUECTL:  # breakdown of bluectl's time (not peers): process start-up alone, then + bus + object tree
        tools.append(("(bluectl --version)", lambda: [BLUECTL, "--version"], {}))
        tools.append(("(bluectl adapters)", lambda: [BLUECTL, "adapters"], {}))
    notes and RESULTS["notes"].append(
        "bluetoothctl read: not measurable on a device that is already connected to the second adapter: "
        "bluetoothctl 5.66 tracks GATT objects only of its default controller's devices (the first adapter, hci0 "
        "here; a later `select` does not add those already there) and select-attribute needs a device it saw connect")
    if os.access(VENV_PY, os.X_OK):
        tools.append(("Bleak (D-Bus path)", lambda: [VENV_PY, os.path.join(PEERS, "bleak_read.py"), dev, DEV_PATH,
                                                      BATTERY], {"bleak": True}))
    elif notes:
        RESULTS["notes"].append("Bleak: not available (%s missing)" % VENV_PY)
    return tools


def bench_reads():
    tools = read_tools()
    samples = {}
    for name, _, _ in tools:  # filled in as the runs come (a crash keeps what was measured)
        RESULTS["reads"].append({"tool": name, "runs": []})
        samples[name] = RESULTS["reads"][-1]["runs"]
    # one warm-up run each (page cache over 9p, bluetoothd's first ReadValue), not counted;
    # then READS rounds, the tools interleaved so that drift hits all alike
    dropped = set()
    for rnd in range(READS + 1):
        for name, argv, kw in tools:
            if name in dropped:
                continue
            ensure_connected()
            res = run_read(argv())
            res["round"] = rnd
            log("%s %-24s value %.3fs exit %.3fs cpu %.3fs rc %s value %r" % (
                "warm-up" if rnd == 0 else "round %d" % rnd, name, res["value_s"] or -1, res["exit_s"],
                res["cpu_s"], res["rc"], res["value"]))
            if rnd == 0:
                if res["value_s"] is None:
                    dropped.add(name)
                    RESULTS["notes"].append("%s read: no value in the warm-up run, left out (output: %r)" % (
                        name, res.get("out", "")[-300:]))
            else:
                samples[name].append(res)
                save()
            if res["value_s"] is None:
                log("%s: no value (rc %s): %s" % (name, res["rc"], res.get("out", "")[-500:]))
        log("round %d done" % rnd)


def perf_report(perf, data, out):
    with open(out, "w") as f:
        for args in (["--no-children", "--sort", "dso", "-g", "none"], ["--no-children", "--sort", "symbol", "-g", "none"],
                     ["--children", "--sort", "symbol", "-g", "none"]):
            f.write("### perf report %s\n" % " ".join(args))
            r = sh([perf, "report", "-i", data, "--stdio", "--percent-limit", "0.5"] + args, timeout=300)
            f.write(r.stdout[:60000] + r.stderr[-2000:] + "\n")


def diagnosis(run):
    """A diagnostic (not counted) that runs out of time on a loaded machine
    is noted, not the end of the boot's figures."""
    try:
        run()
    except subprocess.TimeoutExpired as e:
        RESULTS["notes"].append("%s: not made (%s timed out after %s s)" % (run.__name__, e.cmd[0], e.timeout))
        log("%s: timed out: %s" % (run.__name__, e))


def diagnose_subscribe(n=2000):
    """Not counted: a profile of bluectl subscribe during a burst (perf, cpu-clock)."""
    perf = shutil.which("perf")
    if not (BLUECTL and perf):
        return
    data = os.path.join(WORK, "perf-subscribe.data")
    argv = [perf, "record", "-q", "-F", "1000", "-e", "cpu-clock", "-g", "-o", data, "--", BLUECTL, "subscribe",
            PERIPH_ADDR, STREAM, "--adapter", CENTRAL, "--count", str(n), "--format", "raw"]
    r = run_notify("(bluectl subscribe under perf)", argv, n, parse_raw)
    RESULTS["notify"].append(dict(r, rep=0, diagnostic=True))
    perf_report(perf, data, os.path.join(WORK, "diag-subscribe-perf.txt"))


def diagnose_read():
    """Not counted: where bluectl read spends its time. BLUECTL_DEBUG=1 traces, one run
    under perf (a CPU profile), one under dbus-monitor (its D-Bus traffic, timestamped)."""
    if not BLUECTL:
        return
    ensure_connected()
    argv = [BLUECTL, "read", PERIPH_ADDR, "2a19", "--adapter", CENTRAL]
    with open(os.path.join(WORK, "diag-read-debug.txt"), "w") as f:
        for _ in range(3):
            t = time.perf_counter()
            r = subprocess.run(argv, env=dict(ENV, BLUECTL_DEBUG="1"), capture_output=True, text=True, timeout=60)
            f.write("# exit %d after %.3fs\n%s%s\n" % (r.returncode, time.perf_counter() - t, r.stdout, r.stderr))
    perf = shutil.which("perf")
    if perf:
        data = os.path.join(WORK, "perf-read.data")
        sh([perf, "record", "-q", "-F", "2000", "-e", "cpu-clock", "-g", "-o", data, "--"] + argv)
        perf_report(perf, data, os.path.join(WORK, "diag-read-perf.txt"))
    mon = shutil.which("dbus-monitor")
    if mon:
        with open(os.path.join(WORK, "diag-read-dbus-monitor.txt"), "w") as f:
            m = subprocess.Popen([mon, "--system"], stdout=f, stderr=subprocess.STDOUT)
            time.sleep(1.0)
            f.flush()
            sh(argv)
            time.sleep(1.0)
            m.terminate()
            m.wait()


# ------------------------------------------------------------------ read breakdown (strace)
# not read(2): the dynamic loader's and the event loop's eventfd reads would stop the process
# for nothing (libdbus reads only its auth replies with it, and those mark nothing)
STRACE_CALLS = "execve,clone,clone3,socket,connect,sendmsg,sendto,write,writev,recvmsg,recvfrom,exit_group"
STRACE_LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")
STRACE_HEX = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')
STRACE_RET = re.compile(r"\)\s+=\s+(-?\d+)(?:\s+\w+\s+\([^)]*\))?\s*(?:<(\d+\.\d+)>)?\s*$")
STAGES = [  # (key, what; from the first marker to the second)
    ("start", "process start + runtime init: execve → the first thread (Swift: the async main's executor)"),
    ("parse", "argument parsing and set-up: → socket() of the bus connection"),
    ("bus", "bus connection: socket() → the first call to BlueZ (auth, Hello, match rules, name owner)"),
    ("objects", "GetManagedObjects: sent → ReadValue sent (reply, decoding, the mirror, finding the characteristic)"),
    ("readvalue", "ReadValue: sent → its reply read (bluetoothd's ATT read and round trip)"),
    ("output", "output: reply read → value written to stdout (decoding, formatting)"),
    ("exit", "exit: value written → process gone (not in the time to the value)"),
]


def strace_events(path):
    """strace -f -ttt -T -xx lines as (start, end, pid, syscall, args, ret); an
    <unfinished ...> call is joined with its <... resumed> line."""
    events, pending, exits = [], {}, {}
    with open(path, errors="replace") as f:
        for line in f:
            m = STRACE_LINE.match(line.rstrip("\n"))
            if not m:
                continue
            pid, ts, body = int(m.group(1)), float(m.group(2)), m.group(3)
            if body.startswith("+++ exited"):
                exits[pid] = ts
                continue
            if body.startswith("---"):
                continue
            if body.startswith("<..."):
                rm = re.match(r"<\.\.\. (\w+) resumed>(.*)$", body)
                if not rm or pid not in pending:
                    continue
                name, start, args = pending.pop(pid)
                args += rm.group(2)
                end = ts
            else:
                nm = re.match(r"(\w+)\((.*)$", body)
                if not nm:
                    continue
                name, args = nm.group(1), nm.group(2)
                if args.endswith("<unfinished ...>"):
                    pending[pid] = (name, ts, args[:-len("<unfinished ...>")])
                    continue
                start = end = ts
            rm = STRACE_RET.search(args)
            ret = int(rm.group(1)) if rm else None
            if rm and rm.group(2) and start == end:
                end = start + float(rm.group(2))
            events.append((start, end, pid, name, args, ret))
    events.sort()
    return events, exits


class DBusStream:
    """One direction of a bus connection as strace shows it (-xx -s: each buffer
    in hex, cut at -s bytes): the auth lines, then messages back to back, each
    told apart by its header (type, serial, reply serial, member)."""
    def __init__(self):
        self.buf, self.skip, self.text = b"", 0, True

    def feed(self, data, length):
        """Adds what one call moved (`length` bytes, `data` as captured); returns
        the headers of the messages that begin in it."""
        self.buf += data + b"\0" * max(0, length - len(data))  # a cut-off tail: only a body is ever that long
        found = []
        while True:
            if self.skip:
                n = min(self.skip, len(self.buf))
                self.buf, self.skip = self.buf[n:], self.skip - n
                if self.skip:
                    return found
            if self.text:
                self.buf = self.buf.lstrip(b"\0")
                if len(self.buf) < 2:
                    return found
                if self.buf[:1] in (b"l", b"B") and 1 <= self.buf[1] <= 4:  # not BEGIN: a message type
                    self.text = False
                else:
                    nl = self.buf.find(b"\r\n")  # AUTH EXTERNAL, OK <guid>, NEGOTIATE_UNIX_FD, BEGIN, ...
                    if nl < 0:
                        return found
                    self.buf = self.buf[nl + 2:]
                    continue
            if len(self.buf) < 16:
                return found
            e = "<" if self.buf[:1] == b"l" else ">"
            body, serial, flen = struct.unpack_from(e + "III", self.buf, 4)
            if len(self.buf) < 16 + flen:
                return found
            fields, p = {}, 16
            try:
                while p < 16 + flen:
                    p = (p + 7) & ~7
                    code, siglen = self.buf[p], self.buf[p + 1]
                    sig = self.buf[p + 2:p + 2 + siglen]
                    p += 3 + siglen
                    if sig in (b"s", b"o"):
                        p = (p + 3) & ~3
                        n = struct.unpack_from(e + "I", self.buf, p)[0]
                        fields[code] = self.buf[p + 4:p + 4 + n].decode("utf-8", "replace")
                        p += 5 + n
                    elif sig == b"u":
                        p = (p + 3) & ~3
                        fields[code] = struct.unpack_from(e + "I", self.buf, p)[0]
                        p += 4
                    elif sig == b"g":
                        p += self.buf[p] + 2
                    else:
                        break
            except (IndexError, struct.error):
                pass
            found.append((self.buf[1], serial, fields.get(5), fields.get(3)))
            self.skip = ((16 + flen + 7) & ~7) + body


def strace_stages(path):
    """Stage boundaries of one traced one-shot read (see STAGES): the markers are
    syscalls and the D-Bus messages they carry (the ReadValue call's serial, and the
    reply that names it), so they hold for bluectl and for its peers alike (a marker
    a tool does not pass, e.g. no threads or no GetManagedObjects, merges its stage
    into the next)."""
    events, exits = strace_events(path)
    if not events or events[0][3] != "execve":
        return None
    main = events[0][2]
    t = {"exec": events[0][0]}
    bus_fd, sends, rv_serial = None, [], None
    out, into = DBusStream(), DBusStream()
    for start, end, pid, name, args, ret in events:
        fd = re.match(r"(\d+),", args)
        fd = int(fd.group(1)) if fd else None
        if name in ("clone", "clone3") and "first_thread" not in t:
            t["first_thread"] = start
        elif name == "socket" and "AF_UNIX" in args and "SOCK_STREAM" in args and bus_fd is None and ret is not None \
                and ret >= 0:
            t["socket"], bus_fd = start, ret
        elif bus_fd is None or fd != bus_fd:
            if name in ("write", "writev") and fd == 1 and "reply" in t and "stdout" not in t:
                t["stdout"] = start
        elif not ret or ret < 0:
            continue
        elif name in ("sendmsg", "sendto", "write", "writev"):
            data = b"".join(bytes.fromhex(h.replace("\\x", "")) for h in STRACE_HEX.findall(args))
            for typ, serial, _, member in out.feed(data, ret):
                if typ == 1 and member:
                    sends.append((start, member))
                    t.setdefault("sent_" + member, start)
                    if member == "ReadValue" and rv_serial is None:
                        rv_serial = serial
        elif name in ("recvmsg", "recvfrom", "read"):
            data = b"".join(bytes.fromhex(h.replace("\\x", "")) for h in STRACE_HEX.findall(args))
            for typ, _, reply_to, _ in into.feed(data, ret):
                if typ in (2, 3) and rv_serial is not None and reply_to == rv_serial and "reply" not in t:
                    t["reply"] = end
    t["gone"] = exits.get(main) or max(e[1] for e in events)
    if not all(k in t for k in ("socket", "sent_ReadValue", "reply", "stdout")):
        return {"error": "markers missing: %s" % sorted(t)}
    first_call = min(v for k, v in t.items() if k.startswith("sent_") and k[5:] not in (
        "Hello", "AddMatch", "GetNameOwner", "NameHasOwner", "StartServiceByName"))
    thread = t.get("first_thread") if t.get("first_thread", 1e99) < t["socket"] else None
    bounds = [("start", t["exec"], thread or t["exec"]),
              ("parse", thread or t["exec"], t["socket"]),
              ("bus", t["socket"], first_call),
              ("objects", first_call, t["sent_ReadValue"]),
              ("readvalue", t["sent_ReadValue"], t["reply"]),
              ("output", t["reply"], t["stdout"]),
              ("exit", t["stdout"], t["gone"])]
    res = {k: round(b - a, 6) for k, a, b in bounds}
    if thread is None:
        res["start"] = None  # no thread before the bus: start-up and parsing are one stage ("parse")
    if first_call == t["sent_ReadValue"]:
        res["objects"] = None  # no GetManagedObjects
    res["to_value"] = round(t["stdout"] - t["exec"], 6)
    res["threaded"] = thread is not None
    res["calls"] = [(round(ts - t["exec"], 4), m) for ts, m in sends]
    if t.get("sent_Hello"):
        res["auth"] = round(t["sent_Hello"] - t["socket"], 6)  # connect, the auth lines
        if t.get("sent_AddMatch"):
            res["hello"] = round(t["sent_AddMatch"] - t["sent_Hello"], 6)  # Hello, its reply, → the first rule
            res["matches"] = round(first_call - t["sent_AddMatch"], 6)
    return res


def read_breakdown(runs):
    """Not counted in the table: `runs` one-shot reads of each tool under
    strace -f -ttt (only the marker syscalls stop the process: --seccomp-bpf),
    split into STAGES by syscalls; the tools interleaved."""
    strace = shutil.which("strace")
    if not (strace and BLUECTL and runs):
        RESULTS["notes"].append("read breakdown: not made (%s)" % ("no strace in the guest" if not strace else
                                                                  "no bluectl" if not BLUECTL else "0 runs"))
        return
    ensure_connected()
    tools = [t for t in read_tools(notes=False) if t[0] in ("bluectl read", "busctl call", "C libdbus (readvalue.c)")]
    # only the marker syscalls stop the process where strace can filter in the kernel
    seccomp = ["--seccomp-bpf"] if sh([strace, "-f", "--seccomp-bpf", "-e", "trace=exit_group", "-o", os.devnull,
                                       "true"]).returncode == 0 else []
    scratch = tempfile.mkdtemp(prefix="bench-strace-")
    out = {"stages": STAGES, "runs": runs, "seccomp_bpf": bool(seccomp), "tools": {name: [] for name, _, _ in tools}}
    RESULTS["read_breakdown"] = out
    for rnd in range(runs + 1):  # a warm-up round, not counted
        for name, argv, _ in tools:
            ensure_connected()
            # written to the guest's tmpfs while it runs (LAB_OUT is 9p: a round trip per line), kept in WORK after
            base = "strace-read-%s-%d.txt" % (re.sub(r"[^a-z0-9]+", "-", name.lower()), rnd)
            trace = os.path.join(scratch, base)
            r = sh([strace, "-f", "-ttt", "-T", "-xx", "-s", "4096"] + seccomp + ["-e", "trace=" + STRACE_CALLS,
                                                                               "-o", trace] + argv())
            st = strace_stages(trace) if os.path.exists(trace) else None
            if os.path.exists(trace):
                shutil.move(trace, os.path.join(WORK, base))
            if rnd == 0:
                continue
            if st is None or "error" in st or r.returncode != 0:
                st = dict(st or {}, error=(st or {}).get("error") or "rc %d: %s" % (r.returncode, r.stderr[-300:]))
            out["tools"][name].append(st)
            log("breakdown %-24s %s" % (name, " ".join("%s %.1fms" % (k, st[k] * 1000) for k, _ in STAGES
                                                  if st.get(k) is not None)
                                        if "error" not in st else st["error"]))


# ------------------------------------------------------------------ notifications
def stream_idle():
    p = PATHS.get(STREAM)
    return p and not prop(p, CHR_IF, "Notifying", False) and not prop(p, CHR_IF, "NotifyAcquired", False)


def control_state():
    try:
        v = bytes(dbus.Interface(bus.get_object(BLUEZ, PATHS[CONTROL]), CHR_IF).ReadValue({}, timeout=30))
        req, sent, running, notifying = struct.unpack("<IIBB", v[:10])
        return {"requested": req, "sent": sent, "running": running, "notifying": notifying}
    except dbus.exceptions.DBusException as e:
        return {"error": e.get_dbus_name()}


def parse_lines_hex(data):
    return [bytes.fromhex(l) for l in data.decode().split()]


def parse_raw(data):
    return [data[i:i + 20] for i in range(0, len(data), 20)]


def parse_text(data):
    """subscribe's default text in a pipe: one value per line, its hex last."""
    return [bytes.fromhex(l.split()[-1]) for l in data.decode().splitlines() if l.strip()]


def parse_json(data):
    return [bytes.fromhex(json.loads(l)["value"]) for l in data.decode().splitlines() if '"value"' in l]


def parse_btctl(data):
    vals, cur, collecting = [], [], False
    for line in strip(data.decode("utf-8", "replace")).split("\n"):
        if "Value:" in line and "Attribute" in line:
            if collecting and cur:
                vals.append(bytes(cur))
            cur, collecting = [], True
            continue
        if collecting:
            m = re.match(r"\s+((?:[0-9a-f]{2} ){1,16})", line)
            if m:
                cur += [int(x, 16) for x in m.group(1).split()]
                if len(cur) >= 20:
                    vals.append(bytes(cur[:20]))
                    cur, collecting = [], False
            elif cur:
                vals.append(bytes(cur))
                cur, collecting = [], False
    if collecting and cur:
        vals.append(bytes(cur))
    return vals


def check_values(values, n):
    seqs, corrupt = [], 0
    for v in values:
        if len(v) != 20:
            corrupt += 1
            continue
        s = int.from_bytes(v[:4], "little")
        if v[4:] != bytes((s + i) & 0xff for i in range(4, 20)):
            corrupt += 1
            continue
        seqs.append(s)
    uniq = set(seqs)
    missing = len(set(range(n)) - uniq)
    out_of_order = sum(1 for a, b in zip(seqs, seqs[1:]) if b < a)
    return {"received": len(values), "valid": len(seqs), "unique": len(uniq), "missing": missing,
            "duplicates": len(seqs) - len(uniq), "corrupt": corrupt, "out_of_order": out_of_order}


def btctl_output(path):
    with open(path, "rb") as f:
        return strip(f.read().decode("utf-8", "replace"))


def btctl_setup(p, out_path):
    """Make bluetoothctl track the device: select the central (resent until it answers:
    bluetoothctl drops what it reads before it has loaded the objects), connect from
    inside it, then turn notifications on once it has listed the stream characteristic."""
    def send(text):
        p.stdin.write(text.encode())
        p.stdin.flush()
    central = ENV.get("CENTRAL_ADDR", "")
    selected = re.compile(r"Controller %s .*\[default\]" % re.escape(central))
    end = time.monotonic() + 60
    while not selected.search(btctl_output(out_path)):
        if time.monotonic() > end or p.poll() is not None:
            return "bluetoothctl never selected the central %s" % central
        send("select %s\n" % central)
        wait(lambda: selected.search(btctl_output(out_path)), 1, "", 0.05, quiet=True)
    send("connect %s\n" % PERIPH_ADDR)
    if not wait(lambda: PATHS[STREAM] in btctl_output(out_path), 60, "bluetoothctl listing the stream", 0.1):
        return "bluetoothctl never listed the stream characteristic"
    send("menu gatt\nselect-attribute %s\nnotify on\n" % PATHS[STREAM])
    return None


def stream_found():
    global PATHS
    PATHS = chr_paths()
    return STREAM in PATHS and CONTROL in PATHS


def run_notify(name, argv, n, parse, ready_prop="Notifying", btctl=False, tag=""):
    ensure_connected()
    # after bluetoothd restarts (it segfaults after Bleak's AcquireNotify runs) the device can be
    # connected again before its GATT objects are back
    if STREAM not in PATHS and not wait(stream_found, 60, "the stream's object before %s" % name, 1):
        log("%s N=%d: no stream characteristic (%s)" % (name, n, sorted(PATHS)))
        return {"tool": name, "n": n, "argv": " ".join(argv), "error": "no stream characteristic on the device "
                "(bluetoothd restarted?)"}
    if not wait(stream_idle, 30, "stream not notifying before %s" % name):
        RESULTS["notes"].append("%s: stream still notifying from the previous consumer" % name)
    out_path = os.path.join(WORK, "notify-%s-%d%s.out" % (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"), n, tag))
    out = open(out_path, "wb")
    err = open(out_path[:-4] + ".err", "wb")
    res = {"tool": name, "n": n, "argv": " ".join(argv)}
    if btctl:
        # bluetoothctl 5.66 tracks GATT objects only of its default controller's devices
        # (hci0, the first, here): it must `select` the central and see the device connect
        dbus.Interface(bus.get_object(BLUEZ, DEV_PATH), DEV_IF).Disconnect(timeout=30)
        wait(lambda: not prop(DEV_PATH, DEV_IF, "Connected", False), 10, "disconnect before bluetoothctl")
        time.sleep(1)
    t_start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.PIPE if btctl else subprocess.DEVNULL)
    if btctl:
        err_msg = btctl_setup(p, out_path)
        if err_msg:
            res["error"] = err_msg
    stream = PATHS[STREAM]
    ok = wait(lambda: bool(prop(stream, CHR_IF, ready_prop, False)) or p.poll() is not None, 60,
              "%s: %s" % (name, ready_prop), 0.05)
    res["setup_s"] = time.perf_counter() - t_start
    if not ok or p.poll() is not None:
        res["error"] = res.get("error") or "subscription never active (exit %s)" % p.poll()
        p.kill()
        p.wait()
        out.close()
        err.close()
        res["stderr"] = open(out_path[:-4] + ".err", "rb").read()[-1000:].decode("utf-8", "replace")
        log("%s N=%d: %s" % (name, n, res["error"]))
        return res
    cpu0 = proc_cpu(p.pid)
    size0 = os.fstat(out.fileno()).st_size
    t_trig = time.perf_counter()
    dbus.Interface(bus.get_object(BLUEZ, PATHS[CONTROL]), CHR_IF).WriteValue(
        dbus.Array(struct.pack("<I", n), signature="y"), {}, timeout=30)
    t_first = t_last = None
    last_size = size0
    exited = None
    idle_limit = 4.0
    while True:
        time.sleep(0.02)
        now = time.perf_counter()
        size = os.fstat(out.fileno()).st_size
        if size != last_size:
            if t_first is None:
                t_first = now
            t_last, last_size = now, size
        wpid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if wpid:
            exited = (status, ru)
            p.returncode = os.waitstatus_to_exitcode(status)
            size = os.fstat(out.fileno()).st_size
            if size != last_size:
                t_last, last_size = time.perf_counter(), size
                t_first = t_first or t_last
            break
        if t_first is None and now - t_trig > 30:
            break
        if t_first is not None and now - t_last > idle_limit:
            break
    if exited:
        cpu1 = exited[1].ru_utime + exited[1].ru_stime
        res["rc"] = p.returncode
        # the whole process as people run it: start-up, finding, subscribing and exit included
        res["process_cpu_s"] = cpu1
        res["process_s"] = time.perf_counter() - t_start
    else:
        cpu1 = proc_cpu(p.pid)
        if btctl:
            try:
                p.stdin.write(b"quit\n")
                p.stdin.flush()
            except OSError:
                pass
        else:
            p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        res["rc"] = "stopped by bench (%s)" % p.returncode
    out.close()
    err.close()
    with open(out_path, "rb") as f:
        data = f.read()
    try:
        values = parse(data)
    except (ValueError, KeyError) as e:
        values = []
        res["error"] = "unparsable output: %s" % e
    res.update(check_values(values, n))
    res["window_s"] = (t_last - t_first) if t_first and t_last else None
    res["first_after_trigger_s"] = (t_first - t_trig) if t_first else None
    res["rate"] = (res["valid"] - 1) / res["window_s"] if res["window_s"] else None
    res["cpu_s"] = (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None
    res["cpu_per_value_us"] = res["cpu_s"] / res["valid"] * 1e6 if res["cpu_s"] is not None and res["valid"] else None
    res["peripheral"] = control_state()
    with open(out_path[:-4] + ".err", "rb") as f:
        res["stderr"] = f.read()[-600:].decode("utf-8", "replace")
    log("%-30s N=%-6d got %5d/%d missing %d ooo %d rate %s/s cpu %s us/value setup %.2fs process cpu %s periph %s" % (
        name, n, res["valid"], n, res["missing"], res["out_of_order"],
        "%.0f" % res["rate"] if res["rate"] else "?",
        "%.0f" % res["cpu_per_value_us"] if res["cpu_per_value_us"] else "?", res["setup_s"],
        "%.2fs" % res["process_cpu_s"] if res.get("process_cpu_s") else "?", res["peripheral"]))
    return res


def notify_consumers(n):
    dev = PERIPH_ADDR
    S = PATHS[STREAM]
    c = []
    for binary, label in ((BLUECTL, "bluectl"), (COMPARE, COMPARE_NAME)):
        if not binary:
            continue
        base = [binary, "subscribe", dev, STREAM, "--adapter", CENTRAL, "--count", str(n)]
        c.append(("%s subscribe --format raw" % label, base + ["--format", "raw"], parse_raw, "Notifying", False))
        c.append(("%s subscribe --json" % label, base + ["--json"], parse_json, "Notifying", False))
        c.append(("%s subscribe (default text)" % label, base, parse_text, "Notifying", False))
        if RESULTS["env"].get("notify_via"):
            c.append(("%s --notify-via acquire (raw)" % label, base + ["--format", "raw", "--notify-via", "acquire"],
                      parse_raw, "NotifyAcquired", False))
    if os.access(os.path.join(CBIN, "notify"), os.X_OK):
        c.append(("C libdbus StartNotify (notify.c)", [os.path.join(CBIN, "notify"), S, str(n)], parse_lines_hex,
                  "Notifying", False))
        c.append(("C libdbus AcquireNotify (notify.c)", [os.path.join(CBIN, "notify"), S, str(n), "acquire"],
                  parse_lines_hex, "NotifyAcquired", False))
    c.append(("python3-dbus StartNotify", [PY, os.path.join(PEERS, "py_notify.py"), "start", S, str(n)],
              parse_lines_hex, "Notifying", False))
    c.append(("python3-dbus AcquireNotify", [PY, os.path.join(PEERS, "py_notify.py"), "acquire", S, str(n)],
              parse_lines_hex, "NotifyAcquired", False))
    if os.access(VENV_PY, os.X_OK):
        c.append(("Bleak StartNotify (default)", [VENV_PY, os.path.join(PEERS, "bleak_notify.py"), "start", dev,
                                                  DEV_PATH, STREAM, str(n)], parse_lines_hex, "Notifying", False))
        c.append(("Bleak AcquireNotify", [VENV_PY, os.path.join(PEERS, "bleak_notify.py"), "acquire", dev,
                                          DEV_PATH, STREAM, str(n)], parse_lines_hex, "NotifyAcquired", False))
    # bluetoothctl 5.66 lists GATT objects only for its default (first) controller's devices; after
    # `select` of the central and a `connect` from inside it, still none: BlueZ keeps the device's
    # service objects across the disconnect, so they are never announced again. Only on request
    # (--consumers bluetoothctl), for a lab where that changes.
    if BTCTL and STDBUF and "bluetoothctl" in CONSUMERS.pattern:
        c.append(("bluetoothctl notify on", [STDBUF, "-oL", BTCTL], parse_btctl, "Notifying", True))
    return c


def consumer_stage(c):
    return "btctl" if c[4] else "acquire" if c[3] == "NotifyAcquired" else "start"


def bench_notify():
    # bluetoothctl last: it needs the device disconnected and connected again (see btctl_setup),
    # and reconnect cycles have crashed this lab's kernel (hci_chan_del) and bluetoothd before
    # AcquireNotify consumers and bluetoothctl last: bluetoothd 5.66 has segfaulted here when an
    # AcquireNotify socket was closed at once, and bluetoothctl needs a reconnect (see btctl_setup),
    # a kind of cycle that has crashed this lab's kernel (hci_chan_del) and bluetoothd before
    # Every other round runs its consumers in reverse order, so that no consumer always has the
    # same place in a round (the build compared with itself through --compare, 6 rounds, always
    # second: the cheaper of the two in 5 rounds; alternated: in 3, 2026-11-29).
    def in_round_order(consumers, rep):
        return consumers if rep % 2 == 0 else consumers[::-1]
    plan = []
    for stage in ("start", "acquire", "btctl"):
        runs = [(c, n, rep) for n in NOTIFY_NS for rep in range(NOTIFY_REPS)
                for c in in_round_order(notify_consumers(n), rep) if consumer_stage(c) == stage]
        # Bleak's AcquireNotify after every other one: bluetoothd 5.66 has segfaulted after each
        # of its runs here, and the runs right after a restart were slow and lost values
        plan += sorted(runs, key=lambda r: r[0][0] == "Bleak AcquireNotify")
        if BIG and stage == "start":
            # the long run: bluectl and its references, the C client and python3-dbus (StartNotify)
            plan += [(c, BIG, 0) for c in notify_consumers(BIG) if c[0] in (
                "bluectl subscribe --format raw", "C libdbus StartNotify (notify.c)", "python3-dbus StartNotify")]
        if stage == "start":
            plan.append(("diagnose", None, None))
            if "devices" in PARTS:  # before AcquireNotify: bluetoothd 5.66 has crashed after those runs here
                plan.append(("devices", None, None))
    plan = [(c, n, rep) for c, n, rep in plan if isinstance(c, str) and not CONSUMERS.pattern
            or not isinstance(c, str) and CONSUMERS.search(c[0])]
    dropped = set()
    for consumer, n, rep in plan:
        if consumer == "diagnose":
            diagnosis(diagnose_subscribe)
            continue
        if consumer == "devices":
            bench_devices()
            continue
        name, argv, parse, ready, btctl = consumer
        if name in dropped:
            continue
        r = run_notify(name, argv, n, parse, ready, btctl, tag="-%d" % rep)
        RESULTS["notify"].append(dict(r, rep=rep))
        save()
        if not r.get("valid"):
            dropped.add(name)
            RESULTS["notes"].append("%s: nothing received (%s), left out of further runs" % (
                name, r.get("error", "?")))
    if "bluetoothctl" not in CONSUMERS.pattern:
        RESULTS["notes"].append(
            "bluetoothctl notify on: not measurable here: it lists GATT objects only for its default (first) "
            "controller's devices, and after `select` of the central and a `connect` from inside it still none "
            "(BlueZ keeps the service objects across the disconnect, so they are never announced again)")
    if not RESULTS["env"].get("notify_via"):
        RESULTS["notes"].append("bluectl --notify-via acquire: not available (bluectl subscribe --help lists no --notify-via)")


# ------------------------------------------------------------------ several devices at once
def connect_device(path, addr):
    if connected(path):
        return True
    if BLUECTL:  # finds the device first when the central has not seen it yet (hci2's, in a fresh boot)
        r = sh([BLUECTL, "connect", addr, "--adapter", CENTRAL, "--timeout", "60"], timeout=90)
        log("bluectl connect %s: exit %d %s" % (addr, r.returncode, r.stderr.strip()[-200:]))
        if wait(lambda: connected(path), 30, "%s: Connected + ServicesResolved" % path):
            return True
    for attempt in range(3):
        try:
            dbus.Interface(bus.get_object(BLUEZ, path), DEV_IF).Connect(timeout=60)
        except dbus.exceptions.DBusException as e:
            log("Connect %s: %s" % (path, e.get_dbus_name()))
        if wait(lambda: connected(path), 30, "%s: Connected + ServicesResolved" % path):
            return True
    return False


def demux_json(addr_key, single):
    """bluectl --json lines: each value to the device the line names; the values
    bluectl itself dropped (its `dropped` events: stdout too slow) under "dropped"."""
    def parse(lines, into):
        for line in lines:
            if b'"dropped"' in line:
                into.setdefault("dropped", []).append(json.loads(line).get("count", 0))
            if b'"value"' not in line:
                continue
            rec = json.loads(line)
            key = addr_key.get(rec.get("device"), single)
            if key:
                into.setdefault(key, []).append(bytes.fromhex(rec["value"]))
    return parse


def demux_hex(key):
    def parse(lines, into):
        for line in lines:
            if line.strip():
                into.setdefault(key, []).append(bytes.fromhex(line.decode().strip()))
    return parse


def run_devices(tool, keys, devs, n, ms, rep):
    """One run of `tool` on the devices `keys` at once, each streaming a burst of n
    values paced at one every ms ms: bluectl is one `subscribe A,B --json`,
    python3-dbus one py_notify.py (StartNotify) per device. Per device: loss and
    order, rate between its first and last value (as this harness sees them
    arrive, polled every 20 ms, for every tool alike); the consumers' CPU from
    the trigger to their exit."""
    res = {"tool": tool, "devices": keys, "n": n, "ms": ms, "rep": rep}
    for k in keys:
        if not connect_device(devs[k]["path"], devs[k]["addr"]):
            res["error"] = "cannot connect %s" % devs[k]["addr"]
            return res
        if not wait(lambda k=k: not prop(devs[k]["stream"], CHR_IF, "Notifying", False), 30,
                    "%s stream idle" % k, quiet=True):
            RESULTS["notes"].append("devices %s %s: stream still notifying from the previous run" % (tool, k))
    label = "%s-%s-%d" % (tool.split()[0], "+".join(keys), rep)
    procs = []  # (argv, out path, parse)
    if tool.startswith("bluectl"):
        addr_key = {devs[k]["addr"]: k for k in keys}
        procs.append(([BLUECTL, "subscribe", ",".join(devs[k]["addr"] for k in keys), STREAM, "--adapter", CENTRAL,
                       "--count", str(n), "--json"], os.path.join(WORK, "devices-%s.out" % label),
                      demux_json(addr_key, keys[0] if len(keys) == 1 else None)))
    else:
        for k in keys:
            procs.append(([PY, os.path.join(PEERS, "py_notify.py"), "start", devs[k]["stream"], str(n)],
                          os.path.join(WORK, "devices-%s-%s.out" % (label, k)), demux_hex(k)))
    running = []
    for argv, path, parse in procs:
        out = open(path, "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=open(path[:-4] + ".err", "wb"), stdin=subprocess.DEVNULL)
        running.append({"p": p, "out": out, "path": path, "parse": parse, "pos": 0, "rest": b"", "exit": None})
    ok = all(wait(lambda k=k: bool(prop(devs[k]["stream"], CHR_IF, "Notifying", False))
                  or any(r["p"].poll() is not None for r in running), 60, "%s %s: Notifying" % (tool, k), 0.05)
             for k in keys)
    if not ok or any(r["p"].poll() is not None for r in running):
        res["error"] = "subscription never active (exits %s)" % [r["p"].poll() for r in running]
        for r in running:
            if r["p"].poll() is None:
                r["p"].kill()
            r["p"].wait()
            r["out"].close()
        log("devices %s %s: %s" % (tool, keys, res["error"]))
        return res
    for r in running:
        r["cpu0"] = proc_cpu(r["p"].pid)
    values, first, last = {}, {}, {}
    t_trig = time.perf_counter()
    for k in keys:
        dbus.Interface(bus.get_object(BLUEZ, devs[k]["control"]), CHR_IF).WriteValue(
            dbus.Array(struct.pack("<II", n, ms), signature="y"), {}, timeout=30)

    def poll(now):
        for r in running:
            with open(r["path"], "rb") as f:
                f.seek(r["pos"])
                chunk = f.read()
            if not chunk:
                continue
            r["pos"] += len(chunk)
            data = r["rest"] + chunk
            lines = data.split(b"\n")
            r["rest"] = lines.pop()
            before = {k: len(v) for k, v in values.items()}
            r["parse"](lines, values)
            for k, v in values.items():
                if len(v) != before.get(k, 0):
                    first.setdefault(k, now)
                    last[k] = now
    t_change = None
    while True:
        time.sleep(0.02)
        now = time.perf_counter()
        for r in running:
            if r["exit"] is None:
                wpid, status, ru = os.wait4(r["p"].pid, os.WNOHANG)
                if wpid:
                    r["exit"] = (os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime)
                    r["p"].returncode = r["exit"][0]
        seen = sum(len(v) for v in values.values())
        poll(now)
        if sum(len(v) for v in values.values()) != seen:
            t_change = now
        if all(r["exit"] for r in running):
            poll(time.perf_counter())
            break
        if t_change is None and now - t_trig > 30 or t_change is not None and now - t_change > 4:
            break
    cpu = 0.0
    for r in running:
        if r["exit"]:
            cpu += r["exit"][1] - r["cpu0"]
            r["rc"] = r["exit"][0]
        else:
            cpu += (proc_cpu(r["p"].pid) or r["cpu0"]) - r["cpu0"]
            r["p"].send_signal(signal.SIGINT)
            try:
                r["p"].wait(timeout=10)
            except subprocess.TimeoutExpired:
                r["p"].kill()
                r["p"].wait()
            r["rc"] = "stopped by bench (%s)" % r["p"].returncode
        r["out"].close()
    res["rc"] = [r["rc"] for r in running]
    res["per_device"] = {}
    total = 0
    for k in keys:
        d = check_values(values.get(k, []), n)
        span = (last[k] - first[k]) if k in first else None
        d["rate"] = (d["valid"] - 1) / span if span else None
        d["addr"] = devs[k]["addr"]
        res["per_device"][k] = d
        total += d["valid"]
    res["cpu_s"] = cpu
    res["cpu_per_value_us"] = cpu / total * 1e6 if total else None
    res["dropped_by_consumer"] = sum(values.get("dropped", []))
    log("devices %-14s %-10s rep %d: %s; cpu %.2fs = %s us/value" % (
        tool, "+".join(keys), rep, "; ".join("%s %d/%d missing %d ooo %d %s/s" % (
            k, d["valid"], n, d["missing"], d["out_of_order"], "%.0f" % d["rate"] if d["rate"] else "?")
            for k, d in res["per_device"].items()), cpu, "%.0f" % res["cpu_per_value_us"] if total else "?"))
    return res


def bench_devices():
    """Two lab peripherals streaming at once (hci0: bluetoothd's GATT server; hci2:
    periph.py's own ATT server), the bursts paced (unpaced, hci2 outruns bluetoothd
    5.66, which then drops values before any client sees them): bluectl on each
    device alone, then on both at once (one process), then python3-dbus, one
    StartNotify consumer per device, both at once; DEVICES_REPS rounds in turn."""
    addr2 = ENV.get("PERIPH2_ADDR")
    if not (BLUECTL and addr2 and DEVICES_N):
        RESULTS["notes"].append("devices: not run (%s)" % ("no bluectl" if not BLUECTL else "no PERIPH2_ADDR"
                                                            if not addr2 else "--devices 0"))
        return
    devs = {"hci0": {"addr": PERIPH_ADDR, "path": DEV_PATH}, "hci2": {"addr": addr2, "path": dev_path(addr2)}}
    out = RESULTS["devices"] = {"n": DEVICES_N, "ms": DEVICES_MS, "reps": DEVICES_REPS, "runs": [],
                                "addresses": {k: d["addr"] for k, d in devs.items()}}
    for k, d in devs.items():
        if not connect_device(d["path"], d["addr"]):
            out["error"] = "cannot connect %s" % d["addr"]
            return
        paths = chr_paths(d["path"])
        if STREAM not in paths or CONTROL not in paths:
            out["error"] = "%s: no stream/control characteristic (%s)" % (d["addr"], sorted(paths))
            return
        d["stream"], d["control"] = paths[STREAM], paths[CONTROL]
    try:
        for rep in range(DEVICES_REPS):
            for tool, keys in (("bluectl subscribe --json", ["hci0"]), ("bluectl subscribe --json", ["hci2"]),
                               ("bluectl subscribe --json", ["hci0", "hci2"]),
                               ("python3-dbus StartNotify", ["hci0", "hci2"])):
                out["runs"].append(run_devices(tool, keys, devs, DEVICES_N, DEVICES_MS, rep))
                save()
    finally:
        # the rest of the boot as before: one device connected
        try:
            dbus.Interface(bus.get_object(BLUEZ, devs["hci2"]["path"]), DEV_IF).Disconnect(timeout=30)
        except dbus.exceptions.DBusException as e:
            log("Disconnect %s: %s" % (addr2, e.get_dbus_name()))


def save():
    """bench.json as measured so far: written after every run, so that a boot
    the lab's time limit ends (a loaded machine) keeps what it measured."""
    RESULTS["elapsed_s"] = time.monotonic() - T0
    with open(os.path.join(OUT, "bench.json.tmp"), "w") as f:
        json.dump(RESULTS, f, indent=1)
    os.replace(os.path.join(OUT, "bench.json.tmp"), os.path.join(OUT, "bench.json"))


def main():
    env = RESULTS["env"]
    env["gatt_channels"] = ENV.get("LAB_GATT_CHANNELS", "")
    env["bluectl"] = sh([BLUECTL, "--version"]).stdout.strip() if BLUECTL else "missing"
    env["compare"] = COMPARE_NAME
    env["notify_via"] = bool(BLUECTL) and "--notify-via" in sh([BLUECTL, "subscribe", "--help"]).stdout
    env["bluetoothctl"] = sh([BTCTL, "--version"]).stdout.strip() if BTCTL else "missing"
    env["python"] = sys.version.split()[0]
    env["dbus-python"] = dbus.__version__
    if os.access(VENV_PY, os.X_OK):
        env["bleak"] = sh([VENV_PY, "-c", "import importlib.metadata as m; print(m.version('bleak'), "
                                          "m.version('dbus-fast'))"]).stdout.strip()
    log("env: %s" % env)
    # connect once (with bluectl when there is one: it is also what a user would do)
    if BLUECTL:
        t = time.perf_counter()
        r = sh([BLUECTL, "connect", PERIPH_ADDR, "--adapter", CENTRAL, "--timeout", "60"], timeout=90)
        RESULTS["connect"] = {"rc": r.returncode, "s": time.perf_counter() - t, "stderr": r.stderr[-500:]}
        log("bluectl connect: exit %d in %.2fs %s" % (r.returncode, time.perf_counter() - t, r.stderr.strip()[-200:]))
    ensure_connected(first=True)
    log("characteristics: %s" % PATHS)
    try:
        if "reads" in PARTS:
            bench_reads()
            diagnosis(diagnose_read)
            read_breakdown(BREAKDOWN_RUNS)
        if "notify" in PARTS:
            bench_notify()  # runs the devices part too, after the StartNotify consumers
        elif "devices" in PARTS:
            bench_devices()
        if "throughput" in PARTS:
            import throughput  # Scripts/bench.d/throughput.py, beside this script
            throughput.measure(sys.modules[__name__], *THROUGHPUT)
    finally:
        save()
        log("wrote %s" % os.path.join(OUT, "bench.json"))


main()
