"""Inkbird IBS-TH (`sps`) and IBS-TH2/P01B (`tps`) across their ranges, decoded by
inkbird-ble 1.7.1, Home Assistant's library (README here). No vendor specification exists:
inkbird-ble's decoding is the reference. The temperature travels in the company identifier."""

from __future__ import annotations

import logging
import struct

from bleak.backends.device import BLEDevice
from habluetooth import BluetoothServiceInfoBleak
from inkbird_ble import INKBIRDBluetoothDeviceData
from reference import emit, from_update

REFERENCE = "inkbird-ble 1.7.1"
ADDRESS = "49:42:08:00:2C:5B"


def entry(hundredths: int, humidity: int, battery: int) -> dict[int, bytes]:
    """One manufacturer data entry: the temperature as the company id, then 7 bytes."""
    return {struct.unpack("<H", struct.pack("<h", hundredths))[0]: struct.pack("<H", humidity) + b"\x00\x31\x8b" + bytes([battery]) + b"\x08"}


def main() -> None:
    logging.disable(logging.CRITICAL)
    frames: list[tuple[str, str, dict[int, bytes]]] = []
    for name in ("sps", "tps"):
        for t, h, b in ((-4000, 0, 0), (-1, 1, 1), (0, 5000, 50), (2345, 6789, 99), (6000, 10000, 100), (32767, 4444, 88),
                        (-32768, 3333, 77)):
            frames.append((f"{name} {t / 100} °C {h / 100} % {b} %", name, entry(t, h, b)))
    frames.append(("tps humidity 0 (IBS-P01B, no humidity sensor)", "tps", entry(1234, 0, 80)))
    frames.append(("tps humidity 0xFFFF (IBS-P01B firmware 2.3.0)", "tps", entry(1234, 0xFFFF, 80)))
    frames.append(("sps humidity 0 (a dry IBS-TH)", "sps", entry(1234, 0, 80)))
    frames.append(("sps humidity 100.01 % (corrupt)", "sps", entry(1234, 10001, 80)))
    frames.append(("sps humidity 0xFFFF (corrupt)", "sps", entry(1234, 0xFFFF, 80)))
    frames.append(("sps battery 101 % (corrupt)", "sps", entry(1234, 5000, 101)))
    frames.append(("SPS in capitals", "SPS", entry(555, 4000, 60)))
    frames.append(("sps, 6 bytes", "sps", {0x0102: bytes(6)}))
    frames.append(("sps, two entries (which is current?)", "sps", {**entry(1000, 4000, 60), **entry(1100, 4100, 60)}))
    frames.append(("another name", "ibs", entry(1234, 5000, 80)))
    for case, name, manufacturer_data in frames:
        # What Home Assistant hands inkbird-ble: BlueZ's manufacturer data, no raw advertisement.
        info = BluetoothServiceInfoBleak(name, ADDRESS, -60, manufacturer_data, {}, [], "local",
                                         BLEDevice(ADDRESS, name, None), None, True, 0.0, None)
        ref = from_update(INKBIRDBluetoothDeviceData().update(info))
        common = {"manufacturer_data": manufacturer_data, "name": name}
        if not ref:
            emit(case, REFERENCE, ADDRESS, expected=None, **common)
            continue
        model = {"sps": "IBS-TH", "tps": "IBS-TH2"}.get(name.lower())
        expected = {"format": "inkbird", "encrypted": False, **ref, "model": model}
        emit(case, REFERENCE, ADDRESS, expected=expected, **common)


if __name__ == "__main__":
    main()
