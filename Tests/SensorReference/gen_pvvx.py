"""The pvvx firmware's custom format (service data of 0x181A, 15 bytes) and its encrypted
variant (11 bytes), decoded by ble_monitor's bleparser 3.7.3, the decoder the firmware's
README points Home Assistant users to for these formats (README here). Home Assistant's own
libraries do not decode 0x181A."""

from __future__ import annotations

import logging
import struct

from cryptography.hazmat.primitives.ciphers.aead import AESCCM
from reference import emit_bleparser

ADDRESS = "A4:C1:38:2F:86:6C"
KEY = bytes.fromhex("b9ea895fac7eea6d30532432a516f3a3")


def mac_le(address: str) -> bytes:
    return bytes.fromhex(address.replace(":", ""))[::-1]


def custom(temp: int, hum: int, mv: int, battery: int, counter: int, flags: int, address: str = ADDRESS) -> bytes:
    return mac_le(address) + struct.pack("<hHHBBB", temp, hum, mv, battery, counter, flags)


def encrypted(temp: int, hum: int, battery: int, flags: int, counter: int, key: bytes = KEY, address: str = ADDRESS) -> bytes:
    plain = struct.pack("<hHBB", temp, hum, battery, flags)
    nonce = mac_le(address) + bytes([11 + 3, 0x16, 0x1A, 0x18, counter])
    sealed = AESCCM(key, tag_length=4).encrypt(nonce, plain, b"\x11")
    return bytes([counter]) + sealed


def main() -> None:
    logging.disable(logging.CRITICAL)
    frames: list[tuple[str, bytes, bytes | None, str | None]] = []
    for n, (t, h) in enumerate(((-4000, 0), (-1, 1), (0, 5000), (2153, 4567), (6000, 9999), (32767, 10000), (-32768, 65535))):
        frames.append((f"custom {t / 100} °C {h / 100} %", custom(t, h, 2950 + n, 50 + n, n, 0), None, None))
    for mv, battery in ((0, 0), (3300, 100), (65535, 255)):
        frames.append((f"custom battery {mv} mV {battery} %", custom(2000, 5000, mv, battery, 9, 0), None, None))
    for flags in (0x00, 0x01, 0x02, 0x03, 0x1F):
        frames.append((f"custom flags {flags:#04x}", custom(2000, 5000, 3000, 90, 10, flags), None, None))
    frames.append(("custom with another device's MAC", custom(2000, 5000, 3000, 90, 11, 0, address="11:22:33:44:55:66"),
                   None, None))
    frames.append(("custom truncated to 14 bytes", custom(2000, 5000, 3000, 90, 12, 0)[:14], None, None))
    for n, (t, h, b) in enumerate(((-1250, 3333, 0), (0, 0, 100), (2488, 6120, 87))):
        frames.append((f"encrypted {t / 100} °C {h / 100} % {b} %", encrypted(t, h, b, 0, 20 + n), KEY, None))
    frames.append(("encrypted, flags 0x03", encrypted(2000, 5000, 50, 3, 30), KEY, None))
    frames.append(("encrypted, battery 120 (over 100)", encrypted(2000, 5000, 120, 0, 31), KEY, "battery"))
    frames.append(("encrypted, wrong key", encrypted(2000, 5000, 50, 0, 32), bytes(16), "authentication_failed"))
    frames.append(("encrypted, no key", encrypted(2000, 5000, 50, 0, 33), None, "no_key"))
    frames.append(("encrypted, tag altered", encrypted(2000, 5000, 50, 0, 34)[:-1] + b"\x00", KEY, "authentication_failed"))
    for case, data, key, special in frames:
        emit_bleparser(case, ADDRESS, data, key, special, lambda ref, data=data, special=special: expect(ref, data, special))


def expect(ref: dict, data: bytes, special: str | None) -> tuple[dict, list[str]]:
    """bleparser's reading in bluectl's names (the voltage of an encrypted frame is emit_bleparser's)."""
    notes: list[str] = []
    expected = {"format": "pvvx", "encrypted": len(data) == 11, "temperature_c": ref["temperature"],
                "humidity_percent": ref["humidity"], "battery_percent": ref["battery"],
                "reed_switch": bool(ref["opening"]), "trigger_output": bool(ref["switch"])}
    if len(data) == 15:
        expected["voltage_v"] = ref["voltage"]
        if data[:6] != mac_le(ADDRESS):
            notes.append("the frame's MAC is another device's: bleparser and bluectl decode it (atc-ble would not)")
    elif special == "battery" and ref["battery"] == 100:
        expected["battery_percent"] = 120
        notes.append("bleparser caps the battery at 100; bluectl reports the 120 the frame carries")
    return expected, notes

if __name__ == "__main__":
    main()
