"""Govee hygrometers (manufacturer data; H5072/H5075, H5101/H5102/H5177 and their layout,
H5074, H5179) across their ranges, decoded by govee-ble 1.5.2, Home Assistant's library
(README here). No vendor specification exists: govee-ble's decoding is the reference."""

from __future__ import annotations

import logging
import struct

from govee_ble import GoveeBluetoothDeviceData
from reference import emit, from_update, service_info

REFERENCE = "govee-ble 1.5.2"
#: The models of the layouts bluectl decodes (issue 25's list and the others govee-ble decodes
#: with the same code); a slash is govee-ble's "one of these".
DECODED = {"H5072", "H5075", "H5129", "H5100", "H5101", "H5102", "H5103", "H5104", "H5105", "H5108", "H5110", "H5174",
           "H5177", "GV5179", "H5074", "H5179"}
ADDRESS = "A4:C1:38:5D:E1:2B"


def packed(tenths: int, humidity_tenths: int, battery: int, error: bool = False) -> bytes:
    """3 big-endian bytes (bit 23 the sign, |tenths| × 1000 + humidity tenths) and the battery byte."""
    value = abs(tenths) * 1000 + humidity_tenths | (0x800000 if tenths < 0 else 0)
    return value.to_bytes(3, "big") + bytes([battery | (0x80 if error else 0)])


def main() -> None:
    logging.disable(logging.CRITICAL)
    frames: list[tuple[str, str | None, dict[int, bytes]]] = []
    for n, (t, h) in enumerate(((-400, 0), (-1, 1), (0, 500), (1, 999), (235, 457), (1000, 321))):
        frames.append((f"H5075 {t / 10} °C {h / 10} %", "GVH5075_E12B", {0xEC88: b"\x00" + packed(t, h, 50 + n) + b"\x00"}))
    frames.append(("H5075 -40.1 °C (out of range)", "GVH5075_E12B", {0xEC88: b"\x00" + packed(-401, 300, 60) + b"\x00"}))
    frames.append(("H5075 100.1 °C (out of range)", "GVH5075_E12B", {0xEC88: b"\x00" + packed(1001, 300, 60) + b"\x00"}))
    frames.append(("H5075 error bit", "GVH5075_E12B", {0xEC88: b"\x00" + packed(200, 300, 61, error=True) + b"\x00"}))
    frames.append(("H5075 battery 100 %", "GVH5075_E12B", {0xEC88: b"\x00" + packed(200, 300, 100) + b"\x00"}))
    frames.append(("H5072", "GVH5072_E12B", {0xEC88: b"\x00" + packed(-123, 456, 77) + b"\x00"}))
    frames.append(("0xEC88, 6 bytes, no name (H5072 or H5075)", None, {0xEC88: b"\x00" + packed(222, 333, 44) + b"\x00"}))
    for model in ("H5101", "H5102", "H5177", "GV5179", "H5104"):
        frames.append((f"{model} 6 bytes", f"GV{model}_E12B" if not model.startswith("GV") else f"{model}_E12B",
                       {0x0001: b"\x01\x01" + packed(-55, 612, 88)}))
    frames.append(("H5102 with its 6 bytes under another company id", "GVH5102_E12B", {0x1234: b"\x01\x01" + packed(10, 20, 30)}))
    frames.append(("0x0001, 8 bytes, no name (H5108)", None, {0x0001: b"\x01\x01" + packed(301, 401, 55) + b"\x00\x00"}))
    frames.append(("H5101 name, 8 bytes (govee-ble calls it H5108)", "GVH5101_E12B",
                   {0x0001: b"\x01\x01" + packed(301, 401, 55) + b"\x00\x00"}))
    for t, h in ((-2000, 0), (-1, 1), (2345, 6789)):
        frames.append((f"H5074 {t / 100} °C {h / 100} %", "Govee_H5074_E12B",
                       {0xEC88: b"\x00" + struct.pack("<hHB", t, h, 64) + b"\x02"}))
    for t, h in ((-1510, 2200), (0, 10000), (2560, 4321)):
        frames.append((f"H5179 {t / 100} °C {h / 100} %", "Govee_H5179_E12B",
                       {0x8801: b"\x01\x00\x01\x01" + struct.pack("<hHB", t, h, 90)}))
    frames.append(("H5075 name, Apple manufacturer data (not Govee's)", "GVH5075_E12B",
                   {0x004C: b"\x00" + packed(200, 300, 50) + b"\x00"}))
    frames.append(("H5075 with INTELLI_ROCKS glued on", "GVH5075_E12B",
                   {0xEC88: b"\x00" + packed(199, 299, 49) + b"\x00" + b"\x0c\x09" + b"INTELLI_ROCKS" + bytes(10)}))
    frames.append(("H5127 presence frame (not a hygrometer)", "GVH5127_E12B", {0x8843: bytes.fromhex("ec0001010111")}))
    frames.append(("9 bytes under 0xEC88 (H5051, not decoded)", "GVH5179_E12B", {0xEC88: bytes.fromhex("0001010a0b0c0d0e0f")}))
    frames.append(("H5075 truncated to 5 bytes", "GVH5075_E12B", {0xEC88: b"\x00" + packed(200, 300, 50)}))
    frames.append(("unknown name, unknown company", "Thermometer", {0x1234: b"\x00" + packed(200, 300, 50) + b"\x00"}))
    for case, name, manufacturer_data in frames:
        update = GoveeBluetoothDeviceData().update(service_info(ADDRESS, name, manufacturer_data))
        ref = from_update(update)
        model = update.devices[None].model if None in update.devices else None
        common = {"manufacturer_data": manufacturer_data, "name": name}
        other = model is not None and "/" not in model and model not in DECODED
        if not ref or set(ref) - {"temperature_c", "humidity_percent", "battery_percent"} or other:
            note = "govee-ble decodes this frame as another model (not a hygrometer of issue 25's list)" if ref else None
            emit(case, REFERENCE, ADDRESS, expected=None, note=note, reference_said=ref or None, **common)
            continue
        expected = {"format": "govee", "encrypted": False, **ref}
        if model and "/" not in model:
            expected["model"] = model
        emit(case, REFERENCE, ADDRESS, expected=expected, **common)


if __name__ == "__main__":
    main()
