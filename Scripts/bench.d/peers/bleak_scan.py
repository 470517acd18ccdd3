"""Bleak's scanner as a peer for `Scripts/bench scan`: one line per detection
callback on stdout (as `bluectl scan --json --duplicates` prints one per
event), until SIGINT. The harness counts the lines and reads CPU and RSS
from /proc, the same way for both tools. Output is flushed every 10 ms
(bluectl batches its writes too), not per line.

usage: python bleak_scan.py ADAPTER"""
import asyncio
import signal
import sys

from bleak import BleakScanner

out = sys.stdout


def detected(device, advertisement):
    out.write(f"{device.address} {advertisement.rssi}\n")


async def main():
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    scanner = BleakScanner(detection_callback=detected, bluez={"adapter": sys.argv[1]})
    await scanner.start()
    while not stop.is_set():
        out.flush()
        try:
            await asyncio.wait_for(stop.wait(), 0.01)
        except asyncio.TimeoutError:
            pass
    await scanner.stop()
    out.flush()


asyncio.run(main())
