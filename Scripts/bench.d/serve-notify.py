#!/usr/bin/python3 -u
"""bluectl's peripheral role measured in ONE lab boot (Scripts/lab run --fast
Scripts/bench.d/serve-notify.py): `bluectl serve` on the server adapter
($SERVER, hci3) fed on stdin at full speed, to two centrals on hci1 in turn:

  (i)  `bluectl subscribe --count N --json`
  (ii) the python3-dbus central Tests/Lab/gattc.py (StartNotify, a JSON line per value)

per run: values received, lost, out of order, the rate from the first to the
last value at the central, CPU per value (ms) of serve and of the central
(user + system from /proc over the stream, from the moment both are ready
to the central's last value), and how long the feed took. Then the time a
client waits for a read answered from serve's static value: gattc.py's
ReadValue R times one after the other (median, p90), against serve (a
read-only characteristic) and against BlueZ's example-gatt-server on hci0
(body sensor location, a static value from python). No assertion: figures
for docs/benchmarks.md and the issue's closing note.

usage: serve-notify.py [--n N] [--reps R] [--reads R]     writes $LAB_OUT/serve-notify.json
"""
import calendar
import json
import os
import subprocess
import sys
import threading
import time

import dbus
from procfs import cpu_s as proc_cpu

ENV = os.environ
BLUECTL, CENTRAL, SERVER, SRV = ENV["BLUECTL"], ENV.get("CENTRAL", "hci1"), ENV["SERVER"], ENV["SERVER_ADDR"]
PERIPH = ENV["PERIPH_ADDR"]
REPO, OUT = ENV.get("REPO", "."), ENV.get("LAB_OUT", "/tmp")
WORK = os.path.join(OUT, "serve-notify")
os.makedirs(WORK, exist_ok=True)
GATTC = os.path.join(REPO, "Tests/Lab/gattc.py")
SPEC = os.path.join(REPO, "Tests/Lab/serve-flags.json")
PY = "/usr/bin/python3"
READ_ONLY = "b1ec7200-0000-4000-8000-000000000001"
NOTIFY = "b1ec7200-0000-4000-8000-000000000004"
BODY_LOC = "00002a38-0000-1000-8000-00805f9b34fb"
T0 = time.monotonic()


def opt(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


N, REPS, READS = opt("--n", 2000), opt("--reps", 3), opt("--reads", 200)


def log(*a):
    print("[%6.1fs]" % (time.monotonic() - T0), *a, flush=True)


def wait(cond, limit, step=0.1):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False


def lines_of(path):
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def value(seq):
    return seq.to_bytes(4, "little") + bytes((seq + i) & 0xFF for i in range(4, 20))


bus = dbus.SystemBus()
om = dbus.Interface(bus.get_object("org.bluez", "/"), "org.freedesktop.DBus.ObjectManager")
DEV = "/org/bluez/%s/dev_%s" % (CENTRAL, SRV.replace(":", "_"))


def known():
    return "org.bluez.Device1" in om.GetManagedObjects().get(dbus.ObjectPath(DEV), {})


class Serve:
    """bluectl serve with --advertise, its stdin a pipe."""

    def __init__(self):
        self.out_path = os.path.join(WORK, "serve.out")
        self.out = open(self.out_path, "w")
        self.err = open(self.out_path[:-4] + ".err", "w")
        adapter = dbus.Interface(bus.get_object("org.bluez", "/org/bluez/" + CENTRAL), "org.bluez.Adapter1")
        if known():
            adapter.RemoveDevice(DEV)
        # btvirt reports an advertisement when its set is enabled: discover first
        adapter.SetDiscoveryFilter({"Transport": "le"})
        adapter.StartDiscovery()
        self.p = subprocess.Popen([BLUECTL, "serve", SPEC, "--adapter", SERVER, "--advertise", "--name", "bluectl-bench",
                                   "--json", "--timeout", "3000"], stdin=subprocess.PIPE, stdout=self.out, stderr=self.err)
        ok = wait(lambda: '"serving"' in open(self.out_path).read(), 60) and wait(known, 60)
        adapter.StopDiscovery()
        if not ok:
            raise SystemExit("serve did not come up or was not seen: %s" % open(self.out_path[:-4] + ".err").read()[-500:])
        r = subprocess.run([PY, "-I", GATTC, "--adapter", CENTRAL, SRV, "connect"], capture_output=True, text=True, timeout=90)
        if r.returncode:
            raise SystemExit("gattc.py connect: %s" % r.stderr)
        log("serve up, %s connected: %s" % (CENTRAL, r.stdout.strip()))

    def events(self, kind):
        return [l for l in lines_of(self.out_path) if l.get("event") == kind]

    def feed(self, n):
        data = b"".join(b'{"characteristic":"%s","value":"%s"}\n' % (NOTIFY.encode(), value(i).hex().encode()) for i in range(n))
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def stop(self):
        self.p.send_signal(2)
        try:
            rc = self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = "killed"
        log("serve exit %s" % rc)


def run(serve, name, argv, parse, tag):
    out_path = os.path.join(WORK, "%s-%s.out" % (name, tag))
    subs0 = len(serve.events("subscribed"))
    with open(out_path, "w") as out, open(out_path[:-4] + ".err", "w") as err:
        c = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        ready = wait(lambda: len(serve.events("subscribed")) > subs0, 60, 0.05)
        time.sleep(0.3)
        s_cpu0, c_cpu0 = proc_cpu(serve.p.pid), proc_cpu(c.pid)
        t_feed0 = time.monotonic()
        feeder = threading.Thread(target=serve.feed, args=(N,))
        feeder.start()
        feeder.join()
        feed_s = time.monotonic() - t_feed0
        c_cpu1 = s_cpu1 = None
        end = time.monotonic() + 120
        status = None
        last_size, idle_since = -1, time.monotonic()
        while time.monotonic() < end:
            # the central's CPU just before it exits (it ends after --count values)
            cc, sc = proc_cpu(c.pid), proc_cpu(serve.p.pid)
            pid, st, ru = os.wait4(c.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(st)
                c_cpu1 = ru.ru_utime + ru.ru_stime  # the whole process: ...
                c_cpu1_window = cc  # ... and /proc's last reading before it ended
                s_cpu1 = sc
                break
            size = os.path.getsize(out_path)
            if size != last_size:
                last_size, idle_since = size, time.monotonic()
            elif time.monotonic() - idle_since > 8:
                break
            time.sleep(0.05)
        if status is None:
            c_cpu1_window = proc_cpu(c.pid)
            s_cpu1 = proc_cpu(serve.p.pid)
            c.send_signal(2)
            try:
                c.wait(10)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()
            status = "stopped by the bench (%s)" % c.returncode
    seqs, times = parse(out_path)
    span = times[-1] - times[0] if len(times) > 1 else None
    inorder = seqs == sorted(seqs)
    res = {"central": name, "n": N, "ready": ready, "status": status, "received": len(seqs), "distinct": len(set(seqs)),
           "missing": N - len(set(seqs)), "in_order": inorder, "feed_s": round(feed_s, 3),
           "rate_per_s": round((len(seqs) - 1) / span, 1) if span else None,
           "serve_cpu_ms_per_value": round((s_cpu1 - s_cpu0) * 1000 / max(1, len(seqs)), 3) if s_cpu1 is not None and s_cpu0 is not None else None,
           "central_cpu_ms_per_value": round((c_cpu1_window - c_cpu0) * 1000 / max(1, len(seqs)), 3)
           if c_cpu1_window is not None and c_cpu0 is not None else None,
           "central_cpu_s_whole_process": round(c_cpu1, 3) if c_cpu1 is not None else None}
    if name == "gattc":
        done = [l for l in lines_of(out_path) if l.get("event") == "done"]
        if done:
            res["gattc_own"] = {k: done[-1].get(k) for k in ("rate_per_s", "cpu_ms_per_value", "maxrss_kib")}
    log("%-8s N=%d got %d missing %d in order %s rate %s/s serve %s ms/value central %s ms/value (feed %.2f s, exit %s)" % (
        name, N, res["received"], res["missing"], inorder, res["rate_per_s"], res["serve_cpu_ms_per_value"],
        res["central_cpu_ms_per_value"], feed_s, status))
    return res


def iso(t):
    # "2026-11-26T03:27:59.123456Z" (bluectl's time) -> epoch seconds
    base, frac = t[:19], t[19:].rstrip("Z")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + (float(frac) if frac else 0.0)


def parse_bluectl(path):
    seqs, times = [], []
    for l in lines_of(path):
        if "value" in l:
            seqs.append(int.from_bytes(bytes.fromhex(l["value"])[:4], "little"))
            times.append(iso(l["time"]) if "time" in l else 0.0)
    return seqs, times


def parse_gattc(path):
    seqs, times = [], []
    for l in lines_of(path):
        if "value" in l and "t" in l:
            seqs.append(int.from_bytes(bytes.fromhex(l["value"])[:4], "little"))
            times.append(l["t"])
    return seqs, times


def reads(addr, uuid, label):
    r = subprocess.run([PY, "-I", GATTC, "--adapter", CENTRAL, addr, "read", uuid, "--count", str(READS)],
                       capture_output=True, text=True, timeout=600)
    summary = [json.loads(l) for l in r.stdout.splitlines() if '"event":"reads"' in l]
    if r.returncode or not summary:
        log("reads %s: exit %s %s" % (label, r.returncode, r.stderr[-300:]))
        return {"target": label, "error": r.stderr[-300:]}
    s = summary[-1]
    s["target"] = label
    log("reads %-28s %d: median %.2f ms, p90 %.2f ms (min %.2f, max %.2f)" % (label, READS, s["median_ms"], s["p90_ms"], s["min_ms"], s["max_ms"]))
    return s


def main():
    serve = Serve()
    results = {"n": N, "reps": REPS, "reads": READS, "notify": [], "read_latency": []}
    for rep in range(REPS):
        results["notify"].append(run(serve, "bluectl", [BLUECTL, "subscribe", SRV, NOTIFY, "--count", str(N), "--json",
                                                         "--adapter", CENTRAL], parse_bluectl, "r%d" % rep))
        results["notify"].append(run(serve, "gattc", [PY, "-I", GATTC, "--adapter", CENTRAL, SRV, "notify", NOTIFY,
                                                       "--count", str(N), "--timeout", "120"], parse_gattc, "r%d" % rep))
    results["read_latency"].append(reads(SRV, READ_ONLY, "bluectl serve (hci3)"))
    r = subprocess.run([PY, "-I", GATTC, "--adapter", CENTRAL, PERIPH, "connect"], capture_output=True, text=True, timeout=120)
    if r.returncode == 0:
        results["read_latency"].append(reads(PERIPH, BODY_LOC, "example-gatt-server (hci0)"))
    else:
        log("connect to hci0: %s" % r.stderr[-300:])
    results["serve_read_events"] = len(serve.events("read"))
    serve.stop()
    json.dump(results, open(os.path.join(OUT, "serve-notify.json"), "w"), indent=1)
    log("written %s" % os.path.join(OUT, "serve-notify.json"))


main()
