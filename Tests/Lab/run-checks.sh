#!/bin/bash
# The lab test tier: bluectl against the real BlueZ stack in the lab VM.
# Run it with `Scripts/lab test` (one boot runs every check). Each check runs
# bluectl, captures its real stdout/stderr/exit status and asserts on them
# (and, where it matters, on what bluetoothd says happened: Tests/Lab/bluez.py).
#
# Env (from Scripts/lab): BLUECTL CENTRAL CENTRAL_ADDR PERIPH_ADDR LAB_OUT REPO
# [LAB_GATT_CHANNELS]. Usage: run-checks.sh [NAME-PATTERN] (shell glob on check
# names, e.g. 'scan_*'; default: all).
# Output: PASS/FAIL/SKIP lines, then exactly one line "N passed, M failed".
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=Tests/Lab/lib.sh
. "$HERE/lib.sh"
ONLY=${1:-*}

[ -x "${BLUECTL:-}" ] || { echo "FAIL setup: BLUECTL=${BLUECTL:-} is not executable"; echo "0 passed, 1 failed"; exit 1; }

# ---- the peripheral (hci0): BlueZ's example-gatt-server + example-advertisement,
# and the lab's own service (Scripts/lab.d/guest/periph.py)
DEV=$PERIPH_ADDR
HR_SVC=0000180d-0000-1000-8000-00805f9b34fb
HR_MEAS=00002a37-0000-1000-8000-00805f9b34fb
BODY_LOC=00002a38-0000-1000-8000-00805f9b34fb
HR_CTRL=00002a39-0000-1000-8000-00805f9b34fb
BATT_SVC=0000180f-0000-1000-8000-00805f9b34fb
BATT_LVL=00002a19-0000-1000-8000-00805f9b34fb
TEST_SVC=12345678-1234-5678-1234-56789abcdef0
TEST_CHR=12345678-1234-5678-1234-56789abcdef1     # read, write
TEST_DESC=12345678-1234-5678-1234-56789abcdef2
TEST_ENC_CHR=12345678-1234-5678-1234-56789abcdef3 # encrypt-read, encrypt-write (pairing via the agent)
CUD=00002901-0000-1000-8000-00805f9b34fb
LAB_SVC=b1ec7100-0000-4000-8000-000000000000
LAB_STREAM=b1ec7100-0000-4000-8000-000000000001   # notify: uint32 LE seq + pattern, 20 bytes
LAB_CONTROL=b1ec7100-0000-4000-8000-000000000002  # write uint32 LE N: burst of N
LAB_LONG=b1ec7100-0000-4000-8000-000000000003     # 300 bytes, i & 0xff
ADV_NAME=TestAdvertisement

# Options added to every command that names a device (connect/read/...):
# bluectl's default adapter is the first powered one (hci0, the peripheral
# here), so name the central.
DEV_OPTS=(--adapter "$CENTRAL")
SCAN_TIMEOUT=30    # the lab's advertiser shows up every ~1.5 s; be generous under TCG

# soak_* checks (minutes long) run only when named: run-checks.sh 'soak_*';
# extra_* ones too (they can crash bluetoothd 5.66 and so spoil the checks after them).
run() {
  [[ $1 == soak_* && $ONLY != soak_* ]] && return 0
  [[ $1 == extra_* && $ONLY != extra_* ]] && return 0
  [[ $1 == $ONLY ]] && check "$@"; return 0
}

# =====================================================================
# adapters
# =====================================================================
c_adapters_json() {
  bl adapters --json
  expect_rc 0
  expect_json '
check(all(isinstance(l, dict) and "adapter" in l for l in lines), "every line must be an object with \"adapter\"")
a = one(lambda l: l["adapter"] == CENTRAL, "adapter == " + CENTRAL)
check(a.get("address") == CENTRAL_ADDR, "address %r, expected %r" % (a.get("address"), CENTRAL_ADDR))
check(a.get("powered") is True, "powered %r, expected true" % a.get("powered"))
check(isinstance(a.get("discovering"), bool), "discovering must be a bool: %r" % a.get("discovering"))
check(a.get("state") == "poweredOn", "state %r, expected poweredOn" % a.get("state"))
check(isinstance(a.get("name"), str) and isinstance(a.get("alias"), str), "name/alias must be strings")
one(lambda l: l["adapter"] == "hci0", "the peripheral adapter hci0 listed too")'
}
c_adapters_plain() {
  bl adapters
  expect_rc 0
  expect_out "$CENTRAL"
  expect_out "$CENTRAL_ADDR"
}
c_usage_errors() {
  bl scan --timeout notanumber
  expect_rc 64
  bl no-such-subcommand
  expect_rc 64
}

# =====================================================================
# scan
# =====================================================================
SCAN_EXPECT='
d = one(lambda l: l.get("event") == "discovered" and l.get("address") == PERIPH_ADDR, "event discovered, address " + PERIPH_ADDR)
check(d.get("adapter") == CENTRAL, "adapter %r" % d.get("adapter"))
check(d.get("address_type") == "public", "address_type %r, expected public (btvirt)" % d.get("address_type"))
check(d.get("name") == "TestAdvertisement", "name %r" % d.get("name"))
check(isinstance(d.get("rssi"), int), "rssi %r must be an int" % d.get("rssi"))
su = d.get("service_uuids") or []
check(u16("180d") in su and u16("180f") in su, "service_uuids %r lack 180d/180f (full 128-bit form)" % su)
check(d.get("manufacturer_data") == {"0xffff": "00010203"}, "manufacturer_data %r" % d.get("manufacturer_data"))
check(d.get("service_data") == {u16("9999"): "0001020304"}, "service_data %r" % d.get("service_data"))
check("tx_power" not in d or isinstance(d["tx_power"], int), "tx_power %r" % d.get("tx_power"))
check("flags" not in d or is_hex(d["flags"]), "flags %r" % d.get("flags"))
check(str(d.get("path", "")).startswith("/org/bluez/%s/dev_" % CENTRAL), "path %r" % d.get("path"))
'
c_scan_service_filter() {
  bl scan --json --adapter "$CENTRAL" --service "$HR_SVC" --timeout "$SCAN_TIMEOUT" --count 1
  expect_rc 0
  expect_json "$SCAN_EXPECT"
  expect_json 'n = len([l for l in lines if l.get("event") == "discovered"]); check(n == 1, "--count 1 but %d discovered events" % n)'
  awk -v s="$SECS" -v t="$SCAN_TIMEOUT" 'BEGIN { exit !(s < t - 1) }' || fail "--count 1 did not end the scan early (${SECS}s)"
}
c_scan_name_filter() {
  bl scan --json --adapter "$CENTRAL" --name TestAdv --timeout "$SCAN_TIMEOUT" --count 1
  expect_rc 0
  expect_json "$SCAN_EXPECT"
}
c_scan_filter_excludes() {
  bl scan --json --adapter "$CENTRAL" --service 0000feed-0000-1000-8000-00805f9b34fb --timeout 6
  expect_rc 0
  expect_json 'check(not any(l.get("address") == PERIPH_ADDR for l in lines), "the peripheral does not advertise 0xfeed but was reported")'
  awk -v s="$SECS" 'BEGIN { exit !(s >= 5 && s < 20) }' || fail "--timeout 6 ended after ${SECS}s"
}
c_scan_plain() {
  bl scan --adapter "$CENTRAL" --timeout "$SCAN_TIMEOUT" --count 1 --name TestAdv
  expect_rc 0
  expect_out "$PERIPH_ADDR"
  expect_out "$ADV_NAME"
}
c_scan_no_adapter() {
  bl scan --json --adapter hci9 --timeout 3
  expect_rc 69
  [ -s "$ERR" ] || fail "no message on stderr"
}
c_scan_sigint() {
  bl_signal INT 4 scan --json --adapter "$CENTRAL" --timeout 60
  expect_rc 130
  bz wait-adapter Discovering false 10 || fail "$CENTRAL still discovering after SIGINT"
}
c_scan_sigterm() {
  bl_signal TERM 4 scan --json --adapter "$CENTRAL" --timeout 60
  expect_rc 143
}

# =====================================================================
# central subcommands -- each guarded by `bluectl help SUB` (skipped, not
# passed, until it exists). Adjust the forms here as the CLI settles.
# =====================================================================
c_connect() {
  need_sub connect
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  bz wait "$DEV" Connected true 10 || fail "bluetoothd does not show $DEV connected"
  bz wait "$DEV" ServicesResolved true 20 || fail "services not resolved after connect"
}
c_discover() {
  need_sub discover
  bl discover "$DEV" --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json "
want = '$HR_SVC $HR_MEAS $BODY_LOC $HR_CTRL $BATT_SVC $BATT_LVL $TEST_SVC $TEST_CHR $TEST_DESC $CUD $TEST_ENC_CHR $LAB_SVC $LAB_STREAM $LAB_CONTROL $LAB_LONG'.split()
missing = [u for u in want if u not in text.lower()]
check(not missing, 'UUIDs missing from the tree: %s' % missing)"
}
c_read_battery() {
  need_sub read
  bl read "$DEV" battery_level --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json '
check(len(lines) == 1, "expected one line, got %d" % len(lines))
r = lines[0]
check(r.get("characteristic") == u16("2a19"), "characteristic %r" % r.get("characteristic"))
check(is_hex(r.get("value"), 1) and int(r["value"], 16) <= 100, "value %r is not a battery level" % r.get("value"))
check("device" in r, "no device key")'
}
c_read_plain() {
  need_sub read
  bl read "$DEV" "$BODY_LOC" "${DEV_OPTS[@]}"
  expect_rc 0
  expect_out "01"
}
read_value() { # UUID -> VALUE (hex) of `read --json`, into $VALUE
  bl read "$DEV" "$1" --json "${DEV_OPTS[@]}"
  expect_rc 0
  # (sed, not python: a python start costs seconds on a busy TCG guest)
  VALUE=$(sed -n 's/.*"value" *: *"\([0-9a-fA-F]*\)".*/\1/p' "$OUT" | head -1)
  grep -q '"value"' "$OUT" || fail "read --json output has no value"
}
c_write_read_back() {
  need_sub write; need_sub read
  bl write "$DEV" "$TEST_CHR" 0x0102 --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  read_value "$TEST_CHR"
  [ "$VALUE" = 0102 ] || fail "read back $VALUE after writing 0102"
}
c_write_without_response() {
  need_sub write; need_sub read
  bl write "$DEV" "$TEST_CHR" 0xa1b2c3 --without-response "${DEV_OPTS[@]}"
  expect_rc 0
  local i
  for i in 1 2 3; do
    read_value "$TEST_CHR"
    [ "$VALUE" = a1b2c3 ] && return 0
    sleep 1
  done
  fail "read back $VALUE after write-without-response of a1b2c3"
}
c_write_rejected() {
  need_sub write
  # the example's heart rate control point accepts only 0x01
  bl write "$DEV" "$HR_CTRL" 0x02 --with-response "${DEV_OPTS[@]}"
  [ "$KILLED" = 1 ] && fail "did not finish"
  [ "$RC" != 0 ] || fail "a write the peripheral rejects exited 0"
  [ -s "$ERR" ] || fail "no error message on stderr"
}
c_subscribe_heart_rate() {
  need_sub subscribe
  bl subscribe "$DEV" heart_rate_measurement --count 3 --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json '
vals = [l for l in lines if "value" in l]
check(len(vals) == 3, "--count 3 gave %d values" % len(vals))
for l in vals:
    v = l.get("value")
    check(is_hex(v) and len(v) >= 4, "value %r is not a heart rate measurement" % v)
    check(int(v[:2], 16) & 0x06 == 0x06, "flags byte %r (example sends 06/0e)" % v[:2])'
}
c_long_read() {
  need_sub read
  read_value "$LAB_LONG"
  local want; want=$(awk 'BEGIN { for (i = 0; i < 300; i++) printf "%02x", i % 256 }')
  [ "$VALUE" = "$want" ] || fail "long value: got ${#VALUE} hex digits, expected the 300-byte pattern"
}
c_long_write() {
  need_sub write; need_sub read
  local v; v=$(awk 'BEGIN { for (i = 0; i < 300; i++) printf "%02x", (255 - i + 512) % 256 }')
  bl write "$DEV" "$LAB_LONG" "0x$v" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  read_value "$LAB_LONG"
  [ "$VALUE" = "$v" ] || fail "read back ${#VALUE} hex digits, not the 300 bytes written"
}
c_stream_burst() {
  need_sub subscribe; need_sub write
  local n=500 sub_out=$CHECK_DIR/$CHECK_NAME.stream.out sub_err=$CHECK_DIR/$CHECK_NAME.stream.err pid
  note "subscribe in the background, wait until bluetoothd shows Notifying, then ask for $n values"
  timeout -k 5 90 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --count "$n" --json "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_err" < /dev/null &
  pid=$!
  bz wait-notifying "$DEV" "$LAB_STREAM" 30 || { kill $pid 2>/dev/null; cat "$sub_err"; fail "subscription never became active"; }
  local t0; t0=$(_now)
  bl write "$DEV" "$LAB_CONTROL" "0x$(printf '%02x%02x0000' $((n & 255)) $((n >> 8)))" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  wait $pid; local src=$?
  note "subscriber exit $src after $(_dt "$t0")s; stderr: $(head -c 300 "$sub_err")"
  [ $src = 0 ] || fail "subscribe --count $n exited $src"
  OUT=$sub_out
  expect_json "
N = $n
seqs = []
for l in [l for l in lines if 'value' in l]:
    v = bytes.fromhex(l['value'])
    check(len(v) == 20, 'value of %d bytes' % len(v))
    s = int.from_bytes(v[:4], 'little')
    check(v[4:] == bytes((s + i) & 0xff for i in range(4, 20)), 'corrupt value %s' % l['value'])
    seqs.append(s)
check(len(seqs) == N, '%d values, expected %d' % (len(seqs), N))
missing = sorted(set(range(N)) - set(seqs)); dups = len(seqs) - len(set(seqs))
check(not missing and not dups, 'missing %d (first %s), %d duplicates' % (len(missing), missing[:5], dups))
inorder = all(a < b for a, b in zip(seqs, seqs[1:]))
say('in order: %s' % inorder)
if env.get('LAB_GATT_CHANNELS') == '1':
    check(inorder, 'out of order with EATT off (one ATT channel)')"
}
c_pair() {
  need_sub connect
  # forget the device (and its bond), then connect --pair: bluectl scans for it, connects and
  # calls Device1.Pair with its own agent registered (the lab's default agent answers for hci0)
  bz remove "$DEV" || note "remove: device was not known"
  bl connect "$DEV" --pair --json --timeout 45 "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json 'check(lines and lines[0].get("paired") is True, "paired %r" % (lines[0].get("paired") if lines else None))'
  bz wait "$DEV" Paired true 5 || fail "bluetoothd does not show the device paired"
}
c_encrypted_write_read() {
  need_sub write; need_sub read
  # encrypt-write/encrypt-read: bluetoothd pairs (the lab's agent accepts)
  bl write "$DEV" "$TEST_ENC_CHR" 0x0badcafe --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  read_value "$TEST_ENC_CHR"
  [ "$VALUE" = 0badcafe ] || fail "read back $VALUE from the encrypted characteristic"
  bz wait "$DEV" Paired true 5 || fail "bluetoothd does not show the device paired"
}
c_info() {
  need_sub info
  bl info "$DEV" --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json '
d = lines[0] if lines else {}
check(PERIPH_ADDR in json.dumps(d), "info lacks the address")
check(d.get("connected") is True, "connected %r, expected true" % d.get("connected"))'
}
c_disconnect() {
  need_sub disconnect
  bl disconnect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  bz wait "$DEV" Connected false 10 || fail "bluetoothd still shows $DEV connected"
}
c_read_own_connection() {
  need_sub read
  # not connected now: read connects, reads, and disconnects the connection it made
  bz wait "$DEV" Connected false 5 || skip "device still connected"
  bl read "$DEV" battery_level --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json 'check(is_hex(lines[0].get("value"), 1), "value %r" % lines[0].get("value"))'
  bz wait "$DEV" Connected false 10 || fail "bluectl left its own connection up"
}
c_subscribe_disconnect() {
  need_sub subscribe; need_sub disconnect
  local sub_out=$CHECK_DIR/$CHECK_NAME.sub.out sub_err=$CHECK_DIR/$CHECK_NAME.sub.err pid src
  note "subscribe in the background; disconnect the device from another process: subscribe must exit 74"
  timeout -k 5 90 "$BLUECTL" subscribe "$DEV" heart_rate_measurement --json "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_err" < /dev/null &
  pid=$!
  bz wait-notifying "$DEV" "$HR_MEAS" 40 || { kill $pid 2>/dev/null; cat "$sub_err"; fail "subscription never became active"; }
  sleep 2
  bl disconnect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  wait $pid; src=$?
  note "subscriber exit $src; stderr: $(head -c 300 "$sub_err")"
  [ $src = 74 ] || fail "subscribe exited $src after the device disconnected, expected 74"
  [ -s "$sub_err" ] || fail "no message on stderr"
  OUT=$sub_out
  expect_json 'check(len(lines) >= 1, "no notification before the disconnect")'
}
# The lab peripheral's stream state from its control characteristic:
# STREAM_SENT (values sent in the last burst), STREAM_RUNNING, STREAM_NOTIFYING (0/1).
stream_state() {
  read_value "$LAB_CONTROL"
  local v=$VALUE
  STREAM_SENT=$((16#${v:14:2}${v:12:2}${v:10:2}${v:8:2}))
  STREAM_RUNNING=$((16#${v:16:2})); STREAM_NOTIFYING=$((16#${v:18:2}))
}
wait_stream() { # notifying|done SECS
  local end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ]; do
    stream_state
    case $1 in
      notifying) [ "$STREAM_NOTIFYING" = 1 ] && return 0;;
      done) [ "$STREAM_RUNNING" = 0 ] && return 0;;
    esac
    sleep 0.3
  done
  return 1
}
burst_hex() { printf '%02x%02x%02x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
c_extra_stream_acquire() {
  need_sub subscribe; need_sub write
  "$BLUECTL" subscribe --help 2>/dev/null | grep -q -- --notify-via || skip "subscribe has no --notify-via"
  local n=3000 sub_out=$CHECK_DIR/$CHECK_NAME.stream.out sub_err=$CHECK_DIR/$CHECK_NAME.stream.err pid src
  note "AcquireNotify with --check-sequence: every value is printed or its loss reported by number"
  note "(BlueZ 5.66 drops AcquireNotify values under a burst, and bluetoothd has been seen to crash here: run it alone)"
  timeout -k 5 150 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --notify-via acquire --check-sequence u32 --json "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_err" < /dev/null &
  pid=$!
  wait_stream notifying 40 || { kill $pid 2>/dev/null; cat "$sub_err"; fail "the peripheral never saw notifications enabled"; }
  local t0; t0=$(_now)
  bl write "$DEV" "$LAB_CONTROL" "0x$(burst_hex $n)" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  wait_stream done 90 || fail "the burst did not finish"
  note "peripheral sent $STREAM_SENT in $(_dt "$t0")s"
  sleep 2
  kill -INT $pid; wait $pid; src=$?
  note "subscriber exit $src; stderr: $(head -c 400 "$sub_err")"
  [ $src = 130 ] || fail "subscribe exited $src on SIGINT, expected 130"
  grep -q "sequence check of $LAB_STREAM" "$sub_err" || fail "no sequence summary on stderr"
  OUT=$sub_out
  expect_json "
N = $n
seqs = []
reported = 0
for l in lines:
    if l.get('event') == 'gap': reported += l['missing']
    elif l.get('event') == 'late': reported -= 1
    elif 'value' in l:
        v = bytes.fromhex(l['value'])
        check(len(v) == 20, 'value of %d bytes' % len(v))
        seqs.append(int.from_bytes(v[:4], 'little'))
check(seqs, 'no values')
top = max(seqs)
missing = len(set(range(top + 1)) - set(seqs))
say('acquire: %d of %d values, %d missing before the last (%d reported), %d lost at the end' % (len(seqs), N, missing, reported, N - 1 - top))
check(len(seqs) == len(set(seqs)), 'duplicates')
check(missing == reported, 'missing %d but %d reported' % (missing, reported))"
}
c_extra_subscribe_reconnect() {
  need_sub subscribe; need_sub write
  "$BLUECTL" subscribe --help 2>/dev/null | grep -q -- --reconnect || skip "subscribe has no --reconnect"
  local sub_out=$CHECK_DIR/$CHECK_NAME.sub.out sub_err=$CHECK_DIR/$CHECK_NAME.sub.err pid src
  note "subscribe --reconnect; the peripheral (hci0) powers off and on: the gap is reported, values resume"
  timeout -k 5 170 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --reconnect --json --timeout 30 "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_err" < /dev/null &
  pid=$!
  wait_stream notifying 40 || { kill $pid 2>/dev/null; cat "$sub_err"; fail "the peripheral never saw notifications enabled"; }
  local t0; t0=$(_now)
  dbus-send --system --print-reply --dest=org.bluez /org/bluez/hci0 org.freedesktop.DBus.Properties.Set \
    string:org.bluez.Adapter1 string:Powered variant:boolean:false > /dev/null || fail "cannot power hci0 off"
  local end=$((SECONDS + 40))
  until grep -q '"disconnected"' "$sub_out"; do [ $SECONDS -lt $end ] || fail "no disconnected event"; sleep 0.3; done
  note "disconnected reported after $(_dt "$t0")s; powering hci0 on"
  sleep 2
  dbus-send --system --print-reply --dest=org.bluez /org/bluez/hci0 org.freedesktop.DBus.Properties.Set \
    string:org.bluez.Adapter1 string:Powered variant:boolean:true > /dev/null || fail "cannot power hci0 on"
  end=$((SECONDS + 90))
  until grep -q '"reconnected"' "$sub_out"; do
    kill -0 $pid 2>/dev/null || { cat "$sub_err"; fail "subscribe ended before reconnecting"; }
    [ $SECONDS -lt $end ] || { cat "$sub_err"; fail "no reconnected event within 90 s"; }
    sleep 0.5
  done
  note "reconnected after $(_dt "$t0")s in all; stderr: $(head -c 400 "$sub_err")"
  wait_stream notifying 30 || fail "notifications not on again after reconnecting"
  bl write "$DEV" "$LAB_CONTROL" "0x$(burst_hex 5)" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  end=$((SECONDS + 30))
  until [ "$(grep -c '"value"' "$sub_out")" -ge 5 ]; do [ $SECONDS -lt $end ] || fail "values did not resume"; sleep 0.3; done
  kill -TERM $pid; wait $pid; src=$?
  [ $src = 143 ] || fail "subscribe exited $src on SIGTERM, expected 143"
  OUT=$sub_out
  expect_json "
events = [l['event'] for l in lines if 'event' in l]
# The emulated link sometimes comes back for a moment before hci0 is really off (BlueZ says
# Connected again, then not): every loss must be reported, each followed by its reconnect.
check(events and events == ['disconnected', 'reconnected'] * (len(events) // 2), 'events %s' % events)
after = lines[[i for i, l in enumerate(lines) if l.get('event') == 'reconnected'][-1] + 1:]
seqs = [int.from_bytes(bytes.fromhex(l['value'])[:4], 'little') for l in after if 'value' in l]
check(seqs == [0, 1, 2, 3, 4], 'values after reconnecting: %s' % seqs)
say('gaps %s s' % [l['gap_seconds'] for l in lines if l.get('event') == 'reconnected'])"
}
c_soak_stream_100k() {
  need_sub subscribe; need_sub write
  local n=100000 sub_out=/tmp/$CHECK_NAME.out sub_err=$CHECK_DIR/$CHECK_NAME.err pid src
  note "100,000 sequence-numbered notifications (StartNotify) into a file: none missing, none doubled, in order"
  # A boot of its own: find and connect first, so the subscriber and the stream reads never scan at once.
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  timeout -k 5 900 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --count $n --check-sequence u32 "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_err" < /dev/null &
  pid=$!
  wait_stream notifying 40 || { kill $pid 2>/dev/null; cat "$sub_err"; fail "the peripheral never saw notifications enabled"; }
  local t0; t0=$(_now)
  bl write "$DEV" "$LAB_CONTROL" "0x$(burst_hex $n)" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  wait $pid; src=$?
  local secs; secs=$(_dt "$t0")
  note "subscriber exit $src after ${secs}s; stderr: $(head -c 400 "$sub_err")"
  [ $src = 0 ] || fail "subscribe --count $n exited $src"
  grep -q "sequence check of $LAB_STREAM: $n values, 0 missing, 0 late, 0 repeated" "$sub_err" \
    || fail "bluectl's own sequence check: $(grep 'sequence check' "$sub_err")"
  # Independently of bluectl's check: the values themselves, by number.
  "$PY" -I - "$sub_out" $n "$secs" <<'EOF' || fail "the stream in the file is not complete and in order"
import sys
path, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
seqs = []
for line in open(path):
    parts = line.split()
    if len(parts) < 3 or parts[1] == '--':
        print('event line: ' + line.strip()); sys.exit(1)
    v = bytes.fromhex(parts[-1])
    s = int.from_bytes(v[:4], 'little')
    if v[4:] != bytes((s + i) & 0xff for i in range(4, 20)):
        print('corrupt value ' + parts[-1]); sys.exit(1)
    seqs.append(s)
ok = seqs == list(range(n))
print('%d values, %d distinct, in order: %s; %.0f values/s over %.1f s' % (len(seqs), len(set(seqs)), ok, n / secs, secs))
sys.exit(0 if ok else 1)
EOF
  rm -f "$sub_out"
}
c_unknown_device() {
  need_sub read
  bl read 00:11:22:33:44:55 battery_level --json "${DEV_OPTS[@]}"
  expect_rc 68
}

# =====================================================================
run adapters_json c_adapters_json
run adapters_plain c_adapters_plain
run usage_errors c_usage_errors
run scan_service_filter c_scan_service_filter
run scan_name_filter c_scan_name_filter
run scan_filter_excludes c_scan_filter_excludes
run scan_plain c_scan_plain
run scan_no_adapter c_scan_no_adapter
run scan_sigint c_scan_sigint
run scan_sigterm c_scan_sigterm
# ---- central subcommands (guarded) ----
run connect c_connect
run discover c_discover
run read_battery c_read_battery
run read_plain c_read_plain
run write_read_back c_write_read_back
run write_without_response c_write_without_response
run write_rejected c_write_rejected
run subscribe_heart_rate c_subscribe_heart_rate
run long_read c_long_read
run long_write c_long_write
run stream_burst c_stream_burst
run encrypted_write_read c_encrypted_write_read
run pair c_pair
run info c_info
run disconnect c_disconnect
run read_own_connection c_read_own_connection
run subscribe_disconnect c_subscribe_disconnect
run unknown_device c_unknown_device
run soak_stream_100k c_soak_stream_100k
run extra_stream_acquire c_extra_stream_acquire
run extra_subscribe_reconnect c_extra_subscribe_reconnect
summary
