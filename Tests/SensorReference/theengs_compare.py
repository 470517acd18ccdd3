"""Runs every gen_*.py here and decodes the same frames with Theengs Decoder (theengsdecoder
2.5.0), reporting where Theengs disagrees with the reading the frame expects. Not a test:
Theengs is a third opinion, and its disagreements go into the report, not into failures.

    .venv/bin/python Tests/SensorReference/theengs_compare.py [gen_xiaomi.py ...]
"""

from __future__ import annotations

import collections
import json
import pathlib
import subprocess
import sys

import TheengsDecoder

HERE = pathlib.Path(__file__).parent
#: Theengs' property names in bluectl's.
KEYS = {"tempc": "temperature_c", "hum": "humidity_percent", "pres": "pressure_hpa", "batt": "battery_percent",
        "volt": "voltage_v", "accx": "acceleration_x_g", "accy": "acceleration_y_g", "accz": "acceleration_z_g",
        "tx": "tx_power_dbm", "mov": "movement_counter"}


def theengs(frame: dict) -> dict | None:
    """Theengs' reading of each data entry of the frame (the first that decodes)."""
    base = {"id": frame["address"]}
    if frame.get("name"):
        base["name"] = frame["name"]
    entries = [{"manufacturerdata": int(company, 16).to_bytes(2, "little").hex() + data}
               for company, data in (frame.get("manufacturer_data") or {}).items()]
    entries += [{"servicedata": data, "servicedatauuid": "0x" + uuid[4:8]}
                for uuid, data in (frame.get("service_data") or {}).items()]
    if len(entries) > 1 and frame.get("manufacturer_data") and frame.get("service_data"):
        both = dict(base)
        for e in entries:
            both.update(e)
        entries.insert(0, both)
    for e in entries:
        decoded = TheengsDecoder.decodeBLE(json.dumps({**base, **e}))
        if decoded:
            return json.loads(decoded)
    return None


def main() -> None:
    generators = sys.argv[1:] or sorted(p.name for p in HERE.glob("gen_*.py"))
    for generator in generators:
        out = subprocess.run([sys.executable, str(HERE / generator)], capture_output=True, text=True, check=True).stdout
        seen, agree, differences = set(), 0, collections.Counter()
        examples: dict[str, str] = {}
        for line in out.splitlines():
            frame = json.loads(line)
            key = (frame["case"], json.dumps(frame.get("manufacturer_data")), json.dumps(frame.get("service_data")))
            if key in seen:
                continue
            seen.add(key)
            ours = frame.get("expected")
            got = theengs(frame)
            problems = []
            if ours is None:
                if got and any(k in got for k in KEYS):
                    problems.append("decodes a frame bluectl gives no reading for"
                                    + (f" ({frame['expected_error']})" if frame.get("expected_error") else ""))
            elif got is None:
                problems.append("decodes nothing")
            else:
                for theirs, mine in KEYS.items():
                    if mine not in ours:
                        continue
                    if theirs not in got:
                        if ours[mine] is not None:
                            problems.append(f"{mine}: missing")
                        continue
                    if ours[mine] is None or abs(got[theirs] - ours[mine]) > 1e-6:
                        problems.append(f"{mine}: {got[theirs]} (bluectl {ours[mine]})")
            if problems:
                for p in problems:
                    kind = p.split(":")[0] if ":" in p else p
                    differences[kind] += 1
                    examples.setdefault(kind, f"{frame['case']}: {p}")
            else:
                agree += 1
        print(f"{generator}: {len(seen)} frames, Theengs agrees on {agree}")
        for kind, count in differences.most_common():
            print(f"  {count:3d} × {kind} — e.g. {examples[kind]}")


if __name__ == "__main__":
    main()
