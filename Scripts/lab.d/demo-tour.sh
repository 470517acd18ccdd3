#!/bin/bash
# The guest half of Scripts/demo: a tour of bluectl against the lab's virtual
# peripheral, showing bluectl's real (plain text) output. A step whose
# subcommand does not exist yet says so and is skipped; the tour exits
# non-zero if a step that ran failed.
DEV=$PERIPH_ADDR   # device commands name the central: bluectl's default adapter is hci0 (the peripheral)
TEST_CHR=12345678-1234-5678-1234-56789abcdef1
STEP_TIMEOUT=${STEP_TIMEOUT:-90}
shown=0 failed=0 missing=()

implemented() { # same rule as the lab tier's usage_errors: `bluectl help SUB` shows SUB's usage
  local h; h=$(timeout 20 "$BLUECTL" help "$1" 2>&1 < /dev/null) || return 1
  grep -qiE "usage:.*[[:space:]/]$1([[:space:]]|$)" <<<"$h"
}
step() { # TITLE SUBCOMMAND ARGS...
  local title=$1 sub=$2; shift 2
  echo
  echo "== $title"
  if ! implemented "$sub"; then
    echo "   (not yet available: bluectl $sub)"; missing+=("$sub"); return 0
  fi
  echo "\$ bluectl $sub $*"
  local t0=$EPOCHREALTIME rc
  timeout -k 5 "$STEP_TIMEOUT" "$BLUECTL" "$sub" "$@" < /dev/null 2>&1 | sed 's/^/  /'
  rc=${PIPESTATUS[0]}
  local dt; dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" = 0 ]; then echo "   [ok, ${dt}s]"; shown=$((shown + 1))
  else echo "   [FAILED: exit status $rc after ${dt}s]"; failed=$((failed + 1)); fi
}

cat <<INTRO
bluectl tour -- no radio involved: the real Linux Bluetooth stack (kernel,
bluetoothd $(/usr/libexec/bluetooth/bluetoothd --version)) in a VM, with two emulated controllers.
  peripheral hci0 $PERIPH_ADDR: BlueZ's example GATT server (heart rate 180d,
             battery 180f, test service 12345678-...def0) and example advertisement
  central    hci1 $CENTRAL_ADDR: used by bluectl
INTRO

step "1. adapters" adapters
step "2. scan for the peripheral's advertisement" scan --adapter "$CENTRAL" --timeout 30 --count 1 --name TestAdvertisement
step "3. connect" connect "$DEV" --adapter "$CENTRAL"
step "4. discover its GATT services, characteristics and descriptors" discover "$DEV" --adapter "$CENTRAL"
step "5. read the battery level" read "$DEV" battery_level --adapter "$CENTRAL"
step "6. write \"Hello\" to the test characteristic (with response) ..." write "$DEV" "$TEST_CHR" 0x48656c6c6f --with-response --adapter "$CENTRAL"
step "   ... and read it back" read "$DEV" "$TEST_CHR" --adapter "$CENTRAL"
step "7. subscribe to heart rate measurement notifications (3 of them)" subscribe "$DEV" heart_rate_measurement --count 3 --adapter "$CENTRAL"
step "8. disconnect" disconnect "$DEV" --adapter "$CENTRAL"

echo
echo "tour: $shown steps shown, $failed failed${missing:+, not yet available: $(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')}"
[ "$failed" = 0 ]
