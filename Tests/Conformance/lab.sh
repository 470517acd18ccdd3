#!/bin/bash
# Guest side of the conformance run: scenario.py against the lab's real
# bluetoothd 5.66 (central hci1, the lab peripheral on hci0).
# Run: Scripts/lab run --no-build --out .lab/out-conf Tests/Conformance/lab.sh
set -u
/usr/bin/python3 "$REPO/Tests/Conformance/scenario.py" "${CENTRAL:-hci1}" "$PERIPH_ADDR" "$LAB_OUT/conformance-lab.json"
