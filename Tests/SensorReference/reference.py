"""What the gen_<format>.py generators share: printing a frame in the README's format, and
reading a Home Assistant decoder's SensorUpdate in bluectl's quantity names.

A generator builds frames from values it chooses, decodes each with the reference decoder,
and prints the reference's reading. Where bluectl decodes a frame differently on purpose,
the generator checks that the reference's value is exactly what the documented difference
predicts (`differs_by`), then prints bluectl's value with a `note` naming the reference's:
an unexplained difference is never papered over, it fails the Swift test.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from home_assistant_bluetooth import BluetoothServiceInfo

#: bluectl's JSON keys for the Home Assistant sensor keys the formats share, with the
#: divisor from the reference's unit to bluectl's.
HA_KEYS: dict[tuple[str, str | None], tuple[str, int]] = {
    ("temperature", "°C"): ("temperature_c", 1),
    ("humidity", "%"): ("humidity_percent", 1),
    ("pressure", "hPa"): ("pressure_hpa", 1),
    ("battery", "%"): ("battery_percent", 1),
    ("voltage", "mV"): ("voltage_v", 1000),
    ("voltage", "V"): ("voltage_v", 1),
    ("carbon_dioxide", "ppm"): ("co2_ppm", 1),
}


def uuid16(short: int) -> str:
    """A 16-bit SIG UUID written out in full."""
    return f"{short:08x}-0000-1000-8000-00805f9b34fb"


def service_info(address: str, name: str | None = None, manufacturer_data: dict[int, bytes] | None = None,
                 service_data: dict[str, bytes] | None = None) -> BluetoothServiceInfo:
    """What Home Assistant hands its decoders for one advertisement."""
    return BluetoothServiceInfo(name=name or "", address=address, rssi=-60,
                                manufacturer_data=manufacturer_data or {}, service_data=service_data or {},
                                service_uuids=list((service_data or {}).keys()), source="local")


def from_update(update: Any, skip: tuple[str, ...] = ("signal_strength",)) -> dict[str, Any]:
    """A SensorUpdate's values in bluectl's names (README: expected). Keys it does not know
    keep Home Assistant's name prefixed `ha:`, so that the Swift test reports them."""
    values: dict[str, Any] = {}
    for key, value in update.entity_values.items():
        name = str(key.key.value if hasattr(key.key, "value") else key.key)
        if name in skip:
            continue
        unit = update.entity_descriptions[key].native_unit_of_measurement
        unit = str(unit.value) if hasattr(unit, "value") else unit
        native = value.native_value
        if native == "error":
            native = None
        if (name, unit) in HA_KEYS:
            ours, divisor = HA_KEYS[(name, unit)]
            values[ours] = None if native is None else (native / divisor if divisor != 1 else native)
        else:
            values[f"ha:{name}"] = native
    for key, value in update.binary_entity_values.items():
        values[f"ha:{key.key}"] = value.native_value
    return values


def differs_by(reference: Any, ours: Any, predicted: Any) -> bool:
    """Whether the reference's value is exactly the documented difference applied to ours
    (`predicted`, computed by the generator from the value it encoded)."""
    if reference is None or predicted is None:
        return reference is predicted
    return abs(reference - predicted) <= 1e-9


def emit(case: str, reference: str, address: str, *, expected: dict[str, Any] | None = None,
         expected_error: str | None = None, name: str | None = None,
         manufacturer_data: dict[int, bytes] | None = None, service_data: dict[str, bytes] | None = None,
         keys: dict[str, str] | None = None, extra_ok: list[str] | None = None, note: str | None = None,
         reference_said: Any = None) -> None:
    """Prints one frame (README format)."""
    line: dict[str, Any] = {"case": case, "reference": reference, "address": address}
    if name is not None:
        line["name"] = name
    if manufacturer_data:
        line["manufacturer_data"] = {f"0x{company:04X}": data.hex() for company, data in manufacturer_data.items()}
    if service_data:
        line["service_data"] = {uuid: data.hex() for uuid, data in service_data.items()}
    if keys:
        line["keys"] = keys
    if expected_error is not None:
        line["expected_error"] = expected_error
    else:
        line["expected"] = expected
    if extra_ok:
        line["extra_ok"] = extra_ok
    if note:
        line["note"] = note
    if reference_said is not None:
        line["reference_said"] = _json_safe(reference_said)
    print(json.dumps(line, sort_keys=True, allow_nan=False))


def _json_safe(value: Any) -> Any:
    """NaN and infinities (which JSON has no word for) as their Python spelling."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return repr(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


def fail(message: str) -> None:
    """Stops the generator: the reference does not behave as the generator assumed."""
    print(f"generator: {message}", file=sys.stderr)
    sys.exit(1)


def bleparser_service_data(address: str, uuid16_value: int, data: bytes, key: bytes | None = None) -> dict | None:
    """ble_monitor's parser (bleparser) on one service data entry: its sensor dict or None."""
    from bleparser import BleParser

    mac = bytes.fromhex(address.replace(":", ""))
    parser = BleParser(discovery=True, filter_duplicates=False, aeskeys={mac: key} if key else {})
    record = bytes([len(data) + 3, 0x16]) + uuid16_value.to_bytes(2, "little") + data
    sensor, _ = parser.parse_advertisement(mac, -60, service_data_list=[record])
    return sensor if sensor and sensor.get("data") else None


def emit_bleparser(case: str, address: str, data: bytes, key: bytes | None, special: str | None,
                   expected_of: Any) -> None:
    """One 0x181A frame against bleparser: a failure case (`special`: the error bluectl must
    give), no reading, or `expected_of(ref)` → (expected, notes). bleparser's voltage guess
    for encrypted frames (2.2 + 0.9 × battery %, a CR2032 assumed) is checked and left out."""
    from_uuid = uuid16(0x181A)
    ref = bleparser_service_data(address, 0x181A, data, key)
    common = {"service_data": {from_uuid: data}, "keys": {address: key.hex()} if key else None}
    if special is not None and special != "battery":
        if ref is None:
            emit(case, "bleparser 3.7.3", address, expected_error=special, note="bleparser gives no reading either", **common)
        else:
            emit(case, "bleparser 3.7.3", address, expected=None, note="bleparser decoded a frame it should not", **common)
        return
    if ref is None:
        emit(case, "bleparser 3.7.3", address, expected=None, **common)
        return
    expected, notes = expected_of(ref)
    if "voltage_v" not in expected:
        guessed = 2.2 + (3.1 - 2.2) * (ref["battery"] / 100)
        if abs(ref["voltage"] - guessed) > 1e-9:
            expected["voltage_v"] = ref["voltage"]  # unexplained: the Swift test reports it
        else:
            notes.append(f"bleparser adds voltage {guessed:.4f} V, guessed from the battery percentage; "
                         "the encrypted frame carries no voltage")
    emit(case, "bleparser 3.7.3", address, expected=expected, note="; ".join(notes) or None, **common)
