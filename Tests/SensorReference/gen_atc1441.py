"""The ATC1441 format (service data of 0x181A, 13 bytes, big-endian) and the 8-byte
encrypted variant the pvvx firmware sends, decoded by ble_monitor's bleparser 3.7.3
(README here; Home Assistant's own libraries do not decode 0x181A)."""

from __future__ import annotations

import logging
import struct

from cryptography.hazmat.primitives.ciphers.aead import AESCCM
from reference import emit_bleparser

ADDRESS = "A4:C1:38:0B:5E:ED"
KEY = bytes.fromhex("3a1b2c4d5e6f708192a3b4c5d6e7f809")


def atc(temp: int, hum: int, battery: int, mv: int, counter: int, address: str = ADDRESS) -> bytes:
    return bytes.fromhex(address.replace(":", "")) + struct.pack(">hBBHB", temp, hum, battery, mv, counter)


def encrypted(temp_byte: int, hum_byte: int, battery_byte: int, counter: int, key: bytes = KEY) -> bytes:
    nonce = bytes.fromhex(ADDRESS.replace(":", ""))[::-1] + bytes([8 + 3, 0x16, 0x1A, 0x18, counter])
    return bytes([counter]) + AESCCM(key, tag_length=4).encrypt(nonce, bytes([temp_byte, hum_byte, battery_byte]), b"\x11")


def main() -> None:
    logging.disable(logging.CRITICAL)
    frames: list[tuple[str, bytes, bytes | None, str | None]] = []
    for n, (t, h) in enumerate(((-400, 0), (-1, 1), (0, 50), (215, 45), (600, 99), (32767, 100), (-32768, 255))):
        frames.append((f"atc1441 {t / 10} °C {h} %", atc(t, h, 80 + n, 2900 + n, n), None, None))
    for battery, mv in ((0, 0), (100, 3300), (255, 65535)):
        frames.append((f"atc1441 battery {battery} % {mv} mV", atc(200, 50, battery, mv, 9), None, None))
    frames.append(("atc1441 with another device's MAC", atc(200, 50, 90, 3000, 10, address="11:22:33:44:55:66"), None, None))
    frames.append(("atc1441 truncated to 12 bytes", atc(200, 50, 90, 3000, 11)[:12], None, None))
    for n, (t, h, b) in enumerate(((0, 0, 0), (80, 100, 100), (104, 91, 0x80 | 64), (255, 255, 0x7F))):
        frames.append((f"encrypted temperature byte {t} humidity byte {h} battery byte {b:#04x}", encrypted(t, h, b, 20 + n),
                       KEY, None))
    frames.append(("encrypted, wrong key", encrypted(100, 100, 50, 30), bytes(16), "authentication_failed"))
    frames.append(("encrypted, no key", encrypted(100, 100, 50, 31), None, "no_key"))
    for case, data, key, special in frames:
        emit_bleparser(case, ADDRESS, data, key, special, lambda ref, data=data, case=case: expect(ref, data, case))


def expect(ref: dict, data: bytes, case: str) -> tuple[dict, list[str]]:
    """bleparser's reading in bluectl's names (the voltage of an encrypted frame is emit_bleparser's)."""
    notes: list[str] = []
    expected = {"format": "atc1441", "encrypted": len(data) == 8, "temperature_c": ref["temperature"],
                "humidity_percent": ref["humidity"], "battery_percent": ref["battery"]}
    if len(data) == 8:
        expected["trigger_output"] = bool(ref["switch"])
        if ref["battery"] == 100 and case.endswith("0x7f"):
            expected["battery_percent"] = 127
            notes.append("bleparser caps the battery at 100; bluectl reports the 127 the frame's 7 bits carry")
    else:
        expected["voltage_v"] = ref["voltage"]
        if data[:6] != bytes.fromhex(ADDRESS.replace(":", "")):
            notes.append("the frame's MAC is another device's: bleparser and bluectl decode it (atc-ble would not)")
    return expected, notes

if __name__ == "__main__":
    main()
