#!/usr/bin/python3 -u
"""The lab half of `Scripts/bench gateway` (issue 27): `bluectl gateway` against
Theengs Gateway in ONE lab boot, with the same broker and the same advertisers.

The advertisers are `bluectl advertise --bthome` processes on the server
adapter ($SERVER, hci3), each fed a new temperature on stdin RATE times a
second (BlueZ 5.66 signals only changed advertising data, so a reading that
changes is what both gateways see); each value is distinct (advertiser i sends
BASE[i] + k/100), so a reading is counted once however often it is published.
A mosquitto of the guest's own (persistence on, so a subscriber's session
lives through the outage; QoS 0 messages queued for it too) on 127.0.0.1.
The advertisers change their data faster than the emulated air carries it
(bluetoothd updates a set at its own pace, and btvirt reports a set when it is
enabled), and bluetoothd signals a device's ServiceData once for several
reports that arrive together: so the readings "heard" are the distinct BTHome
frames in the PropertiesChanged signals bluetoothd sent for the server's
device (a python3-dbus listener beside the gateway), which is all a BlueZ
client can deliver, and their order is the order a gateway should keep. btmon
records what reached hci1 (the readings "on air", for comparison).
Each gateway in turn, on the central adapter ($CENTRAL, hci1), as a user
would run it (Theengs with its defaults but --publish_advdata, so its messages
carry the raw frame, and a white-list of the server's address; bluectl with
a config naming that address):
  steady   WINDOW seconds: messages published on its topics, the readings heard
           in the window that it delivered (at any time), CPU of its process
           (utime+stime from /proc) per message published and per reading heard
  outage   the broker stopped OUTAGE seconds while readings change, then back;
           after SETTLE seconds more, the share of the readings heard during the
           outage that were delivered, and whether in the order heard
  rss      its process's peak RSS: the largest Rss of /proc/PID/smaps_rollup, read every
           0.5 s (procfs.PeakRss), and VmHWM at the end; its smaps at the end in
           $LAB_OUT/gateway/TOOL.smaps
Writes $LAB_OUT/gateway.json (Scripts/bench.d/bench.py renders it) and every
process's output under $LAB_OUT/gateway/.

usage: gateway-guest.py --theengs PYTHON [--advertisers N] [--rate R] [--window S]
                        [--outage S] [--settle S]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from procfs import PeakRss, cpu_s, peak_rss_kib

ENV = os.environ
BLUECTL, CENTRAL = ENV.get("BLUECTL", ""), ENV.get("CENTRAL", "hci1")
SERVER, SERVER_ADDR = ENV.get("SERVER", ""), ENV.get("SERVER_ADDR", "")
REPO, OUT = ENV.get("REPO", "."), ENV.get("LAB_OUT", "/tmp")
WORK = os.path.join(OUT, "gateway")
AIR = os.path.join("/tmp", "gateway-air.btsnoop")   # btmon's capture (the guest's tmpfs)
PORT = 1883
T0 = time.monotonic()
RESULTS = {"env": {}, "runs": []}


def log(*a):
    print("[%7.1fs] %s" % (time.monotonic() - T0, " ".join(str(x) for x in a)), flush=True)


def save():
    with open(os.path.join(OUT, "gateway.json.tmp"), "w") as f:
        json.dump(RESULTS, f, indent=1)
    os.replace(os.path.join(OUT, "gateway.json.tmp"), os.path.join(OUT, "gateway.json"))


def spawn(name, argv, stdin=None, env=None, show=None):
    out = open(os.path.join(WORK, name + ".out"), "wb")
    err = open(os.path.join(WORK, name + ".err"), "wb")
    log("start %s: %s" % (name, show or " ".join(argv)))
    return subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, env=env, start_new_session=True)


def read(name, suffix=".out"):
    try:
        with open(os.path.join(WORK, name + suffix), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def wait_for(what, cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.2)
    log("gave up waiting for %s after %d s" % (what, timeout))
    return False


def stop(p, sig=signal.SIGTERM, timeout=20):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode if p.returncode >= 0 else 128 - p.returncode   # as a shell says a signal's


class Broker:
    """mosquitto on 127.0.0.1:PORT, persistence on (a stopped broker keeps the
    subscriber's session and its queue)."""

    def __init__(self):
        self.dir = os.path.join("/tmp", "gw-bench-mosquitto")
        os.makedirs(self.dir, exist_ok=True)
        self.conf = os.path.join(WORK, "mosquitto.conf")
        with open(self.conf, "w") as f:
            f.write("listener %d 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\n"
                    "autosave_interval 1\nqueue_qos0_messages true\nmax_queued_messages 0\nuser root\n"
                    % (PORT, self.dir))
        self.p, self.n = None, 0

    def start(self):
        self.n += 1
        self.p = spawn("mosquitto-%d" % self.n, ["mosquitto", "-c", self.conf])

        def up():
            try:
                socket.create_connection(("127.0.0.1", PORT), 1).close()
                return True
            except OSError:
                return False
        if not wait_for("mosquitto", up, 30):
            sys.exit("mosquitto did not take connections: %s" % read("mosquitto-%d" % self.n, ".err"))

    def stop(self):
        stop(self.p)


class Advertisers:
    """N `bluectl advertise --bthome` on SERVER, each sent a new temperature RATE
    times a second by one feeder thread; `sent` is (monotonic time, value)."""

    def __init__(self, n, rate):
        self.rate, self.sent, self.k, self.procs = rate, [], 0, []
        self.base = [-300 + 200 * i for i in range(n)]   # 0.01 steps: 20,000 distinct values each
        self.running = False
        for i in range(n):
            p = spawn("advertise-%d" % i, [BLUECTL, "advertise", "--adapter", SERVER, "--bthome", "temperature=%d" % self.base[i],
                                           "--json", "--duration", "100000"], stdin=subprocess.PIPE)
            if not wait_for("advertise-%d" % i, lambda: '"advertising"' in read("advertise-%d" % i).replace(": ", ":")
                            or p.poll() is not None, 60) or p.poll() is not None:
                sys.exit("advertise %d did not start: %s" % (i, read("advertise-%d" % i, ".err")[-500:]))
            self.procs.append(p)

    def value(self, i, k):
        return round(self.base[i] + (k % 20000) / 100, 2)

    def start(self):
        self.running = True
        self.thread = threading.Thread(target=self._feed, daemon=True)
        self.thread.start()

    def _feed(self):
        period = 1 / self.rate
        next_t = time.monotonic()
        while self.running:
            self.k += 1
            for i, p in enumerate(self.procs):
                v = self.value(i, self.k)
                p.stdin.write(b'{"temperature": %.2f}\n' % v)
                p.stdin.flush()
                self.sent.append((time.monotonic(), v))
            next_t += period
            time.sleep(max(0, next_t - time.monotonic()))

    def pause(self):
        self.running = False
        self.thread.join()

    def between(self, t0, t1):
        return [v for t, v in self.sent if t0 <= t < t1]

    def close(self):
        for p in self.procs:
            stop(p, signal.SIGINT)


def bthome_temperature(hexdata):
    """The temperature (0x02, sint16, 0.01 °C) of a BTHome v2 frame, else None."""
    try:
        b = bytes.fromhex(hexdata)
    except (ValueError, TypeError):
        return None
    i, sizes = 1, {0x00: 1, 0x01: 1, 0x02: 2, 0x03: 2, 0x0C: 2}
    while i < len(b):
        oid = b[i]
        if oid == 0x02 and i + 3 <= len(b):
            return round(int.from_bytes(b[i + 1:i + 3], "little", signed=True) / 100, 2)
        if oid not in sizes:
            return None
        i += 1 + sizes[oid]
    return None


# btmon's timestamps are Unix time in microseconds plus this (BTSNOOP_EPOCH_DELTA in BlueZ)
BTSNOOP_EPOCH_DELTA = 0x00DCDDB30F2F8000


def air(path, index):
    """[(unix time, reading)] of every BTHome frame (service data 0xFCD2) in the LE
    advertising reports controller `index` gave the host, from btmon's capture: what
    the gateways' adapter heard. The advertisers change their data faster than the
    emulated air carries it (bluetoothd updates the set at its own pace), so what was
    heard, not what was sent, is what a gateway can deliver."""
    rows = []
    with open(path, "rb") as f:
        data = f.read()
    off = 16   # "btsnoop\0", version, datalink (2001: the monitor's)
    while off + 24 <= len(data):
        _, incl, flags, _, ts = struct.unpack(">IIIIq", data[off:off + 24])
        pkt = data[off + 24:off + 24 + incl]
        off += 24 + incl
        if flags >> 16 != index or flags & 0xFFFF != 3 or not pkt or pkt[0] != 0x3E:   # an LE meta event of `index`
            continue
        j = pkt.find(b"\x16\xd2\xfc")
        while j > 0:
            frame = pkt[j + 3:j + pkt[j - 1]]
            v = bthome_temperature(frame.hex())
            if v is not None:
                rows.append(((ts - BTSNOOP_EPOCH_DELTA) / 1e6, v))
            j = pkt.find(b"\x16\xd2\xfc", j + 3)
    return rows


# What bluetoothd told its clients: the server device's ServiceData in each
# PropertiesChanged, one line "UNIX_TIME HEX" (the FCD2 member) per signal.
SIGNALS = r"""
import sys, time, dbus, dbus.mainloop.glib
from gi.repository import GLib
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
def changed(iface, props, invalidated):
    for uuid, data in props.get("ServiceData", {}).items():
        if uuid.startswith("0000fcd2"):
            print("%.6f %s" % (time.time(), bytes(data).hex()), flush=True)
dbus.SystemBus().add_signal_receiver(changed, "PropertiesChanged", "org.freedesktop.DBus.Properties", "org.bluez",
                                     sys.argv[1])
GLib.MainLoop().run()
"""


def signalled(name):
    """[(unix time, reading)] from the SIGNALS listener's output."""
    rows = []
    for line in read(name).splitlines():
        t, _, hexdata = line.partition(" ")
        try:
            rows.append((float(t), bthome_temperature(hexdata)))
        except ValueError:
            pass
    return rows


def first_seen(rows, t0=None, t1=None):
    """The distinct readings of [(time, reading)] in the order each first appears (within [t0, t1) if given)."""
    seen, order = set(), []
    for t, v in rows:
        if v is None or v in seen:
            continue
        seen.add(v)
        if (t0 is None or t >= t0) and (t1 is None or t < t1):
            order.append(v)
    return order


def received(name, tool):
    """[(arrival time, reading or None)] of the messages on `tool`'s device topic, from mosquitto_sub -F '%U %t %p'."""
    if tool == "bluectl":
        topic = "bluectl/bench/devices/%s" % SERVER_ADDR
    else:
        topic = "home/TheengsGateway/BTtoMQTT/%s" % SERVER_ADDR.replace(":", "")
    rows = []
    for line in read(name).splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3 or parts[1] != topic:
            continue
        try:
            t, obj = float(parts[0]), json.loads(parts[2])
        except ValueError:
            continue
        if tool == "bluectl":
            v = (obj.get("sensor") or {}).get("temperature_c")
            v = None if v is None else round(v, 2)
        else:
            v = obj.get("tempc")
            v = round(v, 2) if isinstance(v, (int, float)) else bthome_temperature(obj.get("servicedata"))
        rows.append((t, v))
    return rows


def run(tool, argv, env, adv, broker, window, outage, settle):
    """One gateway's steady window and outage; returns its figures."""
    name = "sub-" + tool

    def idle():   # the gateway before has stopped discovering (else: org.bluez.Error.InProgress)
        return subprocess.run(["busctl", "get-property", "org.bluez", "/org/bluez/" + CENTRAL, "org.bluez.Adapter1",
                               "Discovering"], capture_output=True, text=True).stdout.strip() == "b false"
    wait_for("%s not discovering" % CENTRAL, idle, 30)
    sub = spawn(name, ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(PORT), "-q", "1", "-c", "-i", "bench-" + tool,
                       "-F", "%U %t %p", "-t", "#"])
    listener = spawn("signals-" + tool, ["/usr/bin/python3", "-c", SIGNALS,
                                         "/org/bluez/%s/dev_%s" % (CENTRAL, SERVER_ADDR.replace(":", "_"))],
                     show="python3 -c SIGNALS (a PropertiesChanged listener)")
    gw = spawn(tool, argv, env=env)
    rss_reads = PeakRss(gw.pid)
    # monotonic <-> wall clock: mosquitto_sub stamps arrivals with the wall clock
    offset = time.time() - time.monotonic()
    r = {"tool": tool, "argv": argv}
    if not wait_for("%s's first reading" % tool, lambda: any(v is not None for _, v in received(name, tool))
                    or gw.poll() is not None, 120) or gw.poll() is not None:
        r["error"] = "no reading published; exit %s: %s" % (gw.poll(), read(tool, ".err")[-800:])
        rss_reads.stop()
        stop(gw)
        stop(sub)
        stop(listener)
        return r
    # steady
    t0, c0 = time.monotonic(), cpu_s(gw.pid)
    time.sleep(window)
    t1, c1 = time.monotonic(), cpu_s(gw.pid)
    # outage
    broker.stop()
    t2 = time.monotonic()
    time.sleep(outage)
    t3 = time.monotonic()
    broker.start()
    time.sleep(settle)
    rss, vmhwm = rss_reads.stop(), peak_rss_kib(gw.pid)
    # what the resident set is made of, for docs/benchmarks.md: each mapping's Rss, AnonHugePages
    shutil.copyfile("/proc/%d/smaps" % gw.pid, os.path.join(WORK, tool + ".smaps"))
    r["exit"] = stop(gw)
    time.sleep(2)
    stop(sub)
    stop(listener)
    rows = received(name, tool)
    heard = signalled("signals-" + tool)
    w0, w1, o0, o1 = t0 + offset, t1 + offset, t2 + offset, t3 + offset
    heard_steady, heard_outage = first_seen(heard, w0, w1), first_seen(heard, o0, o1)
    r["windows"] = [w0, w1, o0, o1]   # for the readings on air, counted once btmon has written its capture
    got = set(v for _, v in rows if v is not None)
    delivered_outage = [v for v in first_seen(rows) if v in set(heard_outage)]
    r.update({
        "window_s": t1 - t0, "cpu_s": c1 - c0, "messages": sum(1 for t, _ in rows if w0 <= t < w1),
        "readings_sent": len(adv.between(t0, t1)), "readings_heard": len(heard_steady),
        "readings_delivered": sum(1 for v in heard_steady if v in got),
        "outage_s": t3 - t2, "outage_sent": len(adv.between(t2, t3)), "outage_heard": len(heard_outage),
        "outage_delivered": len(delivered_outage),
        "outage_in_order": delivered_outage == [v for v in heard_outage if v in got],
        "peak_rss_kib": rss, "vmhwm_kib": vmhwm, "messages_total": len(rows),
    })
    r["cpu_ms_per_message"] = 1000 * r["cpu_s"] / r["messages"] if r["messages"] else None
    r["cpu_ms_per_reading"] = 1000 * r["cpu_s"] / r["readings_heard"] if r["readings_heard"] else None
    log("%s: %s" % (tool, {k: v for k, v in r.items() if k != "argv"}))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--theengs", default="")
    ap.add_argument("--advertisers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=10)
    ap.add_argument("--window", type=float, default=60)
    ap.add_argument("--outage", type=float, default=60)
    ap.add_argument("--settle", type=float, default=60)
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    if not (BLUECTL and SERVER and SERVER_ADDR):
        sys.exit("gateway-guest: needs BLUECTL, SERVER and SERVER_ADDR (a lab boot with the server adapter)")
    theengs = os.path.join(REPO, a.theengs) if a.theengs else ""
    env = RESULTS["env"]
    env.update({"bluectl": subprocess.run([BLUECTL, "--version"], capture_output=True, text=True).stdout.strip(),
                "advertisers": a.advertisers, "rate_per_advertiser": a.rate, "window_s": a.window,
                "outage_s": a.outage, "settle_s": a.settle})
    if theengs:
        env["theengs"] = subprocess.run([theengs, "-c", "import importlib.metadata as m; print(m.version('TheengsGateway'),"
                                         " m.version('bleak'), m.version('TheengsDecoder'))"],
                                        capture_output=True, text=True).stdout.strip()
    log("env: %s" % env)
    if subprocess.run(["ip", "link", "set", "lo", "up"]).returncode != 0:
        sys.exit("cannot bring the loopback interface up")
    btmon = spawn("btmon", ["btmon", "-w", AIR])
    broker = Broker()
    broker.start()
    adv = Advertisers(a.advertisers, a.rate)
    adv.start()
    config = os.path.join(WORK, "gateway.json")
    with open(config, "w") as f:
        json.dump({"advertisements": {"addresses": [SERVER_ADDR]}}, f)
    state = "/tmp/gw-bench-state"
    os.makedirs(state, exist_ok=True)
    tools = [("bluectl", [BLUECTL, "gateway", "--broker", "mqtt://127.0.0.1:%d" % PORT, "--id", "bench",
                          "--adapter", CENTRAL, "--config", config], dict(ENV, STATE_DIRECTORY=state))]
    if theengs:
        home = os.path.join("/tmp", "theengs-home")
        os.makedirs(home, exist_ok=True)
        tools.append(("theengs", [theengs, "-m", "TheengsGateway", "-H", "127.0.0.1", "-P", str(PORT), "-a", CENTRAL,
                                  "-padv", "1", "-wl", SERVER_ADDR], dict(ENV, HOME=home)))
    try:
        for tool, argv, tenv in tools:
            RESULTS["runs"].append(run(tool, argv, tenv, adv, broker, a.window, a.outage, a.settle))
            save()
    finally:
        adv.pause()
        adv.close()
        broker.stop()
        stop(btmon, signal.SIGINT)
        air_rows = air(AIR, int(CENTRAL[3:]))
        for r in RESULTS["runs"]:
            if "windows" in r:
                w0, w1, o0, o1 = r.pop("windows")
                r.update({"readings_on_air": len(first_seen(air_rows, w0, w1)),
                          "outage_on_air": len(first_seen(air_rows, o0, o1))})
        subprocess.run(["gzip", "-c", AIR], stdout=open(os.path.join(WORK, "air.btsnoop.gz"), "wb"))
        save()
        log("wrote %s" % os.path.join(OUT, "gateway.json"))


if __name__ == "__main__":   # proxy-guest.py imports its pieces
    main()
