"""Bleak's scanner as a peer for `Scripts/bench scan`: counts detection
callbacks while the bus-tier stand-in announces devices and updates.

usage: python bleak_scan.py EXPECTED QUIET_SECONDS
Prints "ready" once scanning, then "count N span S last T cpu C rss_kb R"
(T: time.monotonic() of the last callback)."""
import asyncio
import resource
import sys
import time

from bleak import BleakScanner

EXPECTED, QUIET = int(sys.argv[1]), float(sys.argv[2])
seen = {"count": 0, "first": None, "last": None}


def detected(_device, _advertisement):
    now = time.monotonic()
    seen["count"] += 1
    seen["first"] = seen["first"] or now
    seen["last"] = now


async def main():
    scanner = BleakScanner(detection_callback=detected, bluez={"adapter": "hci0"})
    await scanner.start()
    print("ready", flush=True)
    previous, changed = -1, time.monotonic()
    while seen["count"] < EXPECTED:
        await asyncio.sleep(0.05)
        if seen["count"] != previous:
            previous, changed = seen["count"], time.monotonic()
        elif time.monotonic() - changed > QUIET and seen["count"] > 0:
            break
    await scanner.stop()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    span = (seen["last"] or 0) - (seen["first"] or 0)
    print(f"count {seen['count']} span {span:.2f} last {seen['last'] or 0:.4f} "
          f"cpu {usage.ru_utime + usage.ru_stime:.2f} rss_kb {usage.ru_maxrss}", flush=True)


asyncio.run(main())
