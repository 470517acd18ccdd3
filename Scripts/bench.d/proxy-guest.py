#!/usr/bin/python3 -u
"""The lab half of `Scripts/bench proxy` (issue 28, item 7): `bluectl proxy` on
the central adapter ($CENTRAL, hci1) forwarding advertisements to Home
Assistant's ESPHome client (aioesphomeapi, the repository's .venv) over the
guest's loopback.

The advertisers are the gateway bench's (Scripts/bench.d/gateway-guest.py,
whose pieces this imports): `bluectl advertise --bthome` on the server adapter
($SERVER, hci3), each fed a new, distinct temperature RATE times a second on
stdin. Beside the proxy, a python3-dbus listener prints each PropertiesChanged
bluetoothd sends for the server's device (its BTHome ServiceData), and the
client prints each raw advertisement it is handed (its callback's wall-clock
time, address, data). Over WINDOW seconds:
  forwarded   advertisements the client received (all devices: the lab's
              peripherals advertise too) per second, and of the server's device
  CPU         the proxy's utime+stime (/proc) per advertisement forwarded
  readings    the distinct readings bluetoothd signalled, and how many of them
              reached the client
  latency     per reading, the client's callback minus bluetoothd's signal (the
              first of each on the guest's one clock): median, p90, max. The
              proxy sends its batches every 100 ms (ESPHome's flush interval)
              or at 16 advertisements, so most of it is that wait.
  rss         the proxy's peak RSS: the largest Rss of /proc/PID/smaps_rollup, read
              every 0.5 s (procfs.PeakRss), and VmHWM at the end
Writes $LAB_OUT/proxy.json (Scripts/bench.d/proxy.py renders it) and every
process's output under $LAB_OUT/proxy/.

usage: proxy-guest.py [--advertisers N] [--rate R] [--window S]
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

from procfs import PeakRss, cpu_s, peak_rss_kib

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("gateway_guest", os.path.join(HERE, "gateway-guest.py"))
gw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gw)
gw.WORK = os.path.join(gw.OUT, "proxy")   # where its spawn() and read() keep each process's output
PORT = 6053
PYTHON = os.path.join(gw.REPO, ".venv", "bin", "python")

# The client: every raw advertisement as "UNIX_TIME ADDRESS HEX", one flush per batch.
CLIENT = r"""
import asyncio, sys, time
from aioesphomeapi import APIClient
async def main():
    api = APIClient("127.0.0.1", int(sys.argv[1]), password=None, client_info="bluectl bench")
    await api.connect(login=False)
    def on_advertisements(response):
        now = time.time()
        sys.stdout.write("".join("%.6f %d %s\n" % (now, a.address, bytes(a.data).hex()) for a in response.advertisements))
        sys.stdout.flush()
    api.subscribe_bluetooth_le_raw_advertisements(on_advertisements)
    print("subscribed", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def reading(data):
    """The BTHome temperature in raw advertisement bytes (the service data 0xFCD2 structure), else None."""
    i = 0
    while i + 1 < len(data):
        length = data[i]
        if length >= 3 and data[i + 1] == 0x16 and data[i + 2:i + 4] == b"\xd2\xfc":
            return gw.bthome_temperature(data[i + 4:i + 1 + length].hex())
        i += 1 + length
    return None


def forwarded():
    """[(unix time, address, reading or None)] from the client's output."""
    rows = []
    for line in gw.read("client").splitlines():
        parts = line.split(" ")
        if len(parts) != 3:
            continue
        try:
            rows.append((float(parts[0]), int(parts[1]), reading(bytes.fromhex(parts[2]))))
        except ValueError:
            pass
    return rows


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] if s else None


def measure(adv, window):
    server = int(gw.SERVER_ADDR.replace(":", ""), 16)
    device = "/org/bluez/%s/dev_%s" % (gw.CENTRAL, gw.SERVER_ADDR.replace(":", "_"))
    listener = gw.spawn("signals", ["/usr/bin/python3", "-c", gw.SIGNALS, device],
                        show="python3 -c SIGNALS (a PropertiesChanged listener)")
    proxy = gw.spawn("proxy", [gw.BLUECTL, "proxy", "--adapter", gw.CENTRAL, "--port", str(PORT), "--name", "bench",
                               "--no-mdns"], env=dict(os.environ, BLUECTL_LOG_LEVEL="info"))   # "listening on port"
    rss_reads = PeakRss(proxy.pid)
    r = {}
    if not gw.wait_for("the proxy listening", lambda: "listening on port" in gw.read("proxy", ".err"), 60):
        rss_reads.stop()
        return {"error": "the proxy did not listen: " + gw.read("proxy", ".err")[-800:]}
    client = gw.spawn("client", [PYTHON, "-c", CLIENT, str(PORT)], show="aioesphomeapi client (CLIENT)")
    if not gw.wait_for("the client's first reading", lambda: any(a == server and v is not None
                                                                  for _, a, v in forwarded()), 120):
        r["error"] = "no reading forwarded: %s %s" % (gw.read("client", ".err")[-800:], gw.read("proxy", ".err")[-800:])
        rss_reads.stop()
    else:
        m0, t0, c0 = time.monotonic(), time.time(), cpu_s(proxy.pid)
        time.sleep(window)
        m1, t1, c1 = time.monotonic(), time.time(), cpu_s(proxy.pid)
        r["peak_rss_kib"], r["vmhwm_kib"] = rss_reads.stop(), peak_rss_kib(proxy.pid)
        time.sleep(1)   # the last batch of the window
        rows = forwarded()
        heard = gw.first_seen(gw.signalled("signals"), t0, t1)
        first_signal, first_client = {}, {}
        for t, v in gw.signalled("signals"):
            first_signal.setdefault(v, t)
        for t, a, v in rows:
            if a == server and v is not None:
                first_client.setdefault(v, t)
        latency = [first_client[v] - first_signal[v] for v in heard if v in first_client]
        in_window = [(t, a) for t, a, _ in rows if t0 <= t < t1]
        r.update({
            "window_s": t1 - t0, "cpu_s": c1 - c0, "readings_sent": len(adv.between(m0, m1)), "forwarded": len(in_window),
            "forwarded_server": sum(1 for _, a in in_window if a == server),
            "readings_heard": len(heard), "readings_delivered": len(latency),
            "latency_ms": {"median": 1000 * statistics.median(latency), "p90": 1000 * percentile(latency, 90),
                           "max": 1000 * max(latency), "min": 1000 * min(latency)} if latency else None,
        })
        r["per_s"] = r["forwarded"] / r["window_s"]
        r["cpu_ms_per_advertisement"] = 1000 * r["cpu_s"] / r["forwarded"] if r["forwarded"] else None
    r["exit"] = gw.stop(proxy)
    gw.stop(client)
    gw.stop(listener)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--advertisers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=10)
    ap.add_argument("--window", type=float, default=60)
    a = ap.parse_args()
    os.makedirs(gw.WORK, exist_ok=True)
    if not (gw.BLUECTL and gw.SERVER and gw.SERVER_ADDR):
        sys.exit("proxy-guest: needs BLUECTL, SERVER and SERVER_ADDR (a lab boot with the server adapter)")
    if not os.access(PYTHON, os.X_OK):
        sys.exit("proxy-guest: no test virtualenv at %s (Scripts/deps makes it)" % PYTHON)
    if subprocess.run(["ip", "link", "set", "lo", "up"]).returncode != 0:
        sys.exit("cannot bring the loopback interface up")
    env = {"bluectl": subprocess.run([gw.BLUECTL, "--version"], capture_output=True, text=True).stdout.strip(),
           "aioesphomeapi": subprocess.run([PYTHON, "-c", "import importlib.metadata as m; print(m.version('aioesphomeapi'))"],
                                           capture_output=True, text=True).stdout.strip(),
           "advertisers": a.advertisers, "rate_per_advertiser": a.rate, "window_s": a.window}
    gw.log("env: %s" % env)
    adv = gw.Advertisers(a.advertisers, a.rate)
    adv.start()
    try:
        r = measure(adv, a.window)
    finally:
        adv.pause()
        adv.close()
    gw.log("proxy: %s" % r)
    with open(os.path.join(gw.OUT, "proxy.json"), "w") as f:
        json.dump({"env": env, "run": r}, f, indent=1)


main()
