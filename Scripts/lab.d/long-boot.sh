#!/bin/bash
# The lab boot after the tier in CI (Scripts/test): what used to take four
# boots of their own, in one, in this order --
#   1. the conformance scenario on bluetoothd 5.66, first, on a fresh stack
#      (Tests/Conformance/scenario.py; its record is $LAB_OUT/conformance-lab.json,
#      compared with the stand-in's on the host by Tests/Conformance/run --lab-record);
#   2. the lab checks named in the arguments (Tests/Lab/run-checks.py): the soak,
#      the reconnect across a power cycle and the AcquireNotify burst. Each connects
#      first and ends what it started; bluetoothd's deaths (the burst has crashed
#      5.66) are the supervisor's to handle and each check's to live through.
# usage (guest): long-boot.sh PATTERN...    exit 0 only when both passed; the
# last line is the checks' summary ("N passed, M failed, K skipped").
set -u
conf=0
echo "== conformance scenario on bluetoothd 5.66 (Tests/Conformance/scenario.py)"
/usr/bin/python3 "$REPO/Tests/Conformance/scenario.py" "${CENTRAL:-hci1}" "$PERIPH_ADDR" "$LAB_OUT/conformance-lab.json" \
  > "$LAB_OUT/conformance-lab.log" 2>&1 || conf=$?
echo "== conformance scenario: $([ $conf = 0 ] && echo "recorded" || echo "FAILED (status $conf; conformance-lab.log)")"
checks=0
"$REPO/Tests/Lab/run-checks.py" "$@" || checks=$?
[ $conf = 0 ] || exit $conf
exit $checks
