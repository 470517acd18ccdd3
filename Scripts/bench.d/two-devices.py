#!/usr/bin/python3 -u
"""Several devices at once, measured in ONE lab boot (Scripts/lab run --fast):
one `bluectl subscribe` of the stream of each lab peripheral alone, then of
both at once (`subscribe A,B`), each a burst of N sequence-numbered values:
per device the values received, lost, and the rate from its first to its last
value; for the process its wall time and CPU (user + system, from wait4's
rusage of the subscriber alone). The streams are paced (one value every
--ms ms on each device): hci2's unpaced bursts outrun bluetoothd 5.66, which
then drops values before any client sees them (docs/bluez-pitfalls.md).
No assertion: figures for docs/benchmarks.md.

usage: two-devices.py [--n N] [--ms MS] [--reps R]     writes $LAB_OUT/two-devices.json
"""
import json
import os
import resource
import struct
import subprocess
import sys
import time

ENV = os.environ
BLUECTL, CENTRAL = ENV["BLUECTL"], ENV.get("CENTRAL", "hci1")
DEVICES = {"hci0": ENV["PERIPH_ADDR"], "hci2": ENV["PERIPH2_ADDR"]}
OUT = ENV.get("LAB_OUT", "/tmp")
STREAM = "b1ec7100-0000-4000-8000-000000000001"
CONTROL = "b1ec7100-0000-4000-8000-000000000002"
N = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 3000
REPS = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 3
MS = int(sys.argv[sys.argv.index("--ms") + 1]) if "--ms" in sys.argv else 2


def bluectl(*args, timeout=60):
    return subprocess.run([BLUECTL, *args, "--adapter", CENTRAL], capture_output=True, text=True, timeout=timeout)


def control(device):
    r = bluectl("read", device, CONTROL, "--json")
    if r.returncode != 0:
        return None
    v = bytes.fromhex(json.loads(r.stdout)["value"])
    requested, sent, running, notifying = struct.unpack("<IIBB", v[:10])
    return {"sent": sent, "running": running, "notifying": notifying}


def wait(cond, limit):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.3)
    return False


def run(devices):
    """One subscribe of `devices`, each streaming a burst of N."""
    label = "+".join(devices)
    out_path = os.path.join(OUT, "two-devices.%s.out" % label)
    with open(out_path, "w") as out, open(out_path + ".err", "w") as err:
        started = time.monotonic()
        p = subprocess.Popen([BLUECTL, "subscribe", ",".join(DEVICES[d] for d in devices), STREAM, "--count", str(N),
                              "--json", "--adapter", CENTRAL], stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        ready = all(wait(lambda d=d: (control(DEVICES[d]) or {}).get("notifying") == 1, 40) for d in devices)
        for d in devices:
            bluectl("write", DEVICES[d], CONTROL, "0x" + struct.pack("<II", N, MS).hex(), "--with-response")
        # the subscriber's own rusage (wait4), not that of the bluectl reads and writes above
        deadline, status, usage = time.monotonic() + 120, None, None
        while status is None:
            pid, st, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                status, usage = os.waitstatus_to_exitcode(st), ru
            elif time.monotonic() > deadline:
                p.kill()
            else:
                time.sleep(0.1)
        p.returncode = status
        wall = time.monotonic() - started
    cpu = usage.ru_utime + usage.ru_stime
    per = {}
    for d in devices:
        seqs, times = [], []
        for line in open(out_path):
            l = json.loads(line)
            if l.get("device") == DEVICES[d] and "value" in l:
                seqs.append(int.from_bytes(bytes.fromhex(l["value"])[:4], "little"))
                times.append(l["time"])
        span = None
        if len(times) > 1:
            t = [time.mktime(time.strptime(x[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + x[19:-1]) for x in (times[0], times[-1])]
            span = t[1] - t[0]
        per[d] = {"received": len(seqs), "distinct": len(set(seqs)), "in_order": seqs == sorted(seqs),
                  "missing": N - len(set(seqs)), "rate_per_s": round((len(seqs) - 1) / span, 1) if span else None}
    result = {"devices": devices, "status": status, "ready": ready, "wall_s": round(wall, 2),
              "cpu_s": round(cpu, 3), "cpu_us_per_value": round(cpu * 1e6 / max(1, sum(v["received"] for v in per.values())), 1),
              "per_device": per}
    print(json.dumps(result))
    return result


for d in DEVICES.values():
    bluectl("connect", d)
results = []
for rep in range(REPS):
    for devices in (["hci0"], ["hci2"], ["hci0", "hci2"]):
        results.append(run(devices))
json.dump({"n": N, "reps": REPS, "runs": results}, open(os.path.join(OUT, "two-devices.json"), "w"), indent=1)
