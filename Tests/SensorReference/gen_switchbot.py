"""SwitchBot Meter, Meter Plus and Outdoor Meter (service data of 0xFD3D or 0x0D00, manufacturer
data of 0x0969) across their ranges, decoded by PySwitchbot 3.1.0, Home Assistant's library
(README here)."""

from __future__ import annotations

import logging

from bleak.backends.device import BLEDevice
from bleak.backends.scanner import AdvertisementData
from reference import emit, uuid16
from switchbot.adv_parser import parse_advertisement_data

REFERENCE = "PySwitchbot 3.1.0"
FD3D, OLD = uuid16(0xFD3D), uuid16(0x0D00)
ADDRESS = "D4:1D:8A:03:27:B5"
MODELS = {"Meter": "Meter", "Meter Plus": "Meter Plus", "Indoor/Outdoor Thermo-Hygrometer": "Outdoor Meter"}


def th(celsius_tenths: int, humidity: int, fahrenheit: bool = False, tenths_override: int | None = None) -> bytes:
    """The 3 temperature/humidity bytes of the published layout."""
    magnitude = abs(celsius_tenths)
    tenths = magnitude % 10 if tenths_override is None else tenths_override
    whole = magnitude // 10 | (0x80 if celsius_tenths >= 0 else 0)
    return bytes([tenths, whole, humidity | (0x80 if fahrenheit else 0)])


def manufacturer(temperature: bytes) -> bytes:
    """Manufacturer data after the company id: the MAC, two bytes, the 3 temperature bytes, one more."""
    return bytes.fromhex(ADDRESS.replace(":", "")) + bytes([0x36, 0x03]) + temperature + b"\x00"


def main() -> None:
    logging.disable(logging.CRITICAL)
    frames: list[tuple[str, dict[str, bytes], dict[int, bytes]]] = []
    for n, (t, h) in enumerate(((215, 45), (-53, 80), (1, 0), (-1, 99), (1279, 1), (-1279, 50), (0, 45))):
        frames.append((f"Meter {t / 10} °C {h} %", {FD3D: bytes([ord("T"), 0, 60 + n]) + th(t, h)}, {}))
    for battery in (0, 100, 0xFF):
        frames.append((f"Meter battery byte {battery:#04x}", {FD3D: bytes([ord("T"), 0, battery]) + th(200, 40)}, {}))
    frames.append(("Meter, add mode ('t')", {FD3D: bytes([ord("t"), 0, 90]) + th(200, 40)}, {}))
    frames.append(("Meter, display in Fahrenheit", {FD3D: bytes([ord("T"), 0, 90]) + th(222, 41, fahrenheit=True)}, {}))
    frames.append(("Meter, encrypted bit set", {FD3D: bytes([0x80 | ord("T"), 0, 90]) + th(199, 42)}, {}))
    frames.append(("Meter, old service UUID 0x0D00", {OLD: bytes([ord("T"), 0, 77]) + th(-77, 66)}, {}))
    frames.append(("Meter Plus, service data only", {FD3D: bytes([ord("i"), 0, 88]) + th(305, 31)}, {}))
    frames.append(("Meter Plus, temperature from manufacturer data", {FD3D: bytes([ord("i"), 0, 88]) + th(305, 31)},
                   {0x0969: manufacturer(th(-123, 77))}))
    frames.append(("Outdoor Meter (the published sample)", {FD3D: bytes.fromhex("770064")},
                   {0x0969: bytes.fromhex(ADDRESS.replace(":", "")) + bytes.fromhex("360302963700")}))
    for t in (-300, -5, 0, 555):
        frames.append((f"Outdoor Meter {t / 10} °C", {FD3D: bytes([ord("w"), 0, 70])}, {0x0969: manufacturer(th(t, 60))}))
    frames.append(("Outdoor Meter, service data only (no temperature)", {FD3D: bytes([ord("w"), 0, 70])}, {}))
    frames.append(("Meter, 0.0 °C and 0 %", {FD3D: bytes([ord("T"), 0, 50]) + th(0, 0)}, {}))
    frames.append(("Meter, tenths 12 (over 9)", {FD3D: bytes([ord("T"), 0, 50]) + th(200, 40, tenths_override=12)}, {}))
    frames.append(("Meter, service data of 2 bytes", {FD3D: bytes([ord("T"), 0])}, {}))
    frames.append(("Bot ('H'): not a meter", {FD3D: bytes([ord("H"), 0x10, 0x61])}, {}))
    for case, service_data, manufacturer_data in frames:
        advertisement = AdvertisementData(None, manufacturer_data, service_data, list(service_data), None, -60, ())
        result = parse_advertisement_data(BLEDevice(ADDRESS, None, None), advertisement)
        data = result.data if result else None
        values = data["data"] if data else {}
        common = {"service_data": service_data, "manufacturer_data": manufacturer_data}
        body = next(iter(service_data.values()))
        meter = chr(body[0] & 0x7F) in "TtIiWw"
        notes: list[str] = []
        if not meter:
            emit(case, REFERENCE, ADDRESS, expected=None,
                 note=f"PySwitchbot decodes this {data.get('modelFriendlyName')} too; bluectl only the meters" if values else None,
                 reference_said=values or None, **common)
            continue
        source = manufacturer_data.get(0x0969, b"")[8:11] if len(manufacturer_data.get(0x0969, b"")) >= 11 else body[3:6]
        if source and source[0] & 0x0F > 9:
            emit(case, REFERENCE, ADDRESS, expected_error="invalid", reference_said=values or None,
                 note=f"PySwitchbot adds {source[0] & 0x0F} tenths; the published layout allows 0…9 (0000–1001)", **common)
            continue
        if not values:
            expected = {"format": "switchbot", "encrypted": False}
            if source:
                value = (source[1] & 0x7F) + (source[0] & 0x0F) / 10
                expected["temperature_c"] = value if source[1] & 0x80 else -value
                expected["humidity_percent"] = source[2] & 0x7F
                notes.append("PySwitchbot reports nothing when temperature and humidity are both 0; the layout has no "
                             "such marker, and bluectl decodes 0.0 °C and 0 %")
            if len(body) >= 3:
                expected["battery_percent"] = body[2] & 0x7F
                if not source:
                    notes.append("PySwitchbot reports nothing without a temperature; bluectl the battery the service data carries")
            if len(expected) == 2:
                emit(case, REFERENCE, ADDRESS, expected=None, **common)
            else:
                emit(case, REFERENCE, ADDRESS, expected=expected, note="; ".join(notes), reference_said={}, **common)
            continue
        expected = {"format": "switchbot", "encrypted": False, "temperature_c": values["temperature"],
                    "humidity_percent": values["humidity"]}
        if values.get("battery") is not None:
            expected["battery_percent"] = values["battery"]
        friendly = data.get("modelFriendlyName")
        if friendly in MODELS:
            expected["model"] = MODELS[friendly]
        emit(case, REFERENCE, ADDRESS, expected=expected, **common)


if __name__ == "__main__":
    main()
