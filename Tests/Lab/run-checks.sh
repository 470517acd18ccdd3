#!/bin/bash
# The lab test tier: bluectl against the real BlueZ stack in the lab VM.
# Run it with `Scripts/lab test` (one boot runs every check). Each check runs
# bluectl, captures its real stdout/stderr/exit status and asserts on them
# (and, where it matters, on what bluetoothd says happened: Tests/Lab/bluez.py).
#
# Env (from Scripts/lab): BLUECTL CENTRAL CENTRAL_ADDR PERIPH_ADDR LAB_OUT REPO
# PERIPHERAL2 PERIPH2_ADDR PERIPH2_ADDR_TYPE SERVER SERVER_ADDR [LAB_GATT_CHANNELS]. Usage:
# run-checks.sh [NAME-PATTERN] (shell glob on check names, e.g. 'scan_*';
# default: the tier).
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
# ---- the second peripheral (hci2): a static random address; the same lab
# service (stream, control, long, indicate: the UUIDs above) from periph.py's
# own ATT server, advertised as Periph2 with the service's UUID
DEV2=${PERIPH2_ADDR:-}
PERIPH2_ADAPTER=${PERIPHERAL2:-hci2}
ADV2_NAME=Periph2

# Options added to every command that names a device (connect/read/...):
# bluectl's default adapter is the first powered one (hci0, the peripheral
# here), so name the central.
DEV_OPTS=(--adapter "$CENTRAL")
PERIPH_ADAPTER=hci0 # the peripheral's side of the same bluetoothd
SCAN_TIMEOUT=30    # the lab's advertiser shows up every ~1.5 s; be generous under TCG

# soak_* and extra_* checks (minutes long, or hard on bluetoothd 5.66) run
# only when named, each in a boot of its own (Scripts/test does that in CI):
# run-checks.sh 'soak_*', run-checks.sh extra_subscribe_reconnect.
# The tier (the default pattern) must run exactly TIER_CHECKS checks, and a
# pattern that selects no check fails: a tier that ran nothing proves nothing.
TIER_CHECKS=43
_SELECTED=0
run() {
  [[ $1 == soak_* && $ONLY != soak_* ]] && return 0
  [[ $1 == extra_* && $ONLY != extra_* ]] && return 0
  [[ $1 == $ONLY ]] || return 0
  _SELECTED=$((_SELECTED + 1))
  check "$@"
}
# The closing accounting: every selected check ran, and the tier is whole.
tally() {
  if [ "$_SELECTED" = 0 ]; then
    echo "FAIL selection: no check matches '$ONLY'"; _FAILED=$((_FAILED + 1))
  elif [ "${_RAN:-0}" != "$_SELECTED" ]; then
    echo "FAIL selection: $_SELECTED checks selected, ${_RAN:-0} ran"; _FAILED=$((_FAILED + 1))
  elif [ "$ONLY" = '*' ] && [ "$_SELECTED" != "$TIER_CHECKS" ]; then
    echo "FAIL selection: the tier ran $_SELECTED checks, expected $TIER_CHECKS (update TIER_CHECKS with the checks)"
    _FAILED=$((_FAILED + 1))
  fi
  summary
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
  # every subcommand documents itself: its help names it in a usage line
  local sub
  for sub in adapters adapter scan devices connect disconnect pair unpair trust untrust block unblock info discover read write subscribe; do
    bl help "$sub"
    expect_rc 0
    grep -qiE "usage: *bluectl $sub( |$)" "$OUT" || fail "bluectl help $sub shows no usage line for $sub"
  done
}

# =====================================================================
# scan
# =====================================================================
SCAN_EXPECT='
d = one(lambda l: l.get("event") == "discovered" and l.get("address") == PERIPH_ADDR, "event discovered, address " + PERIPH_ADDR)
check(d.get("adapter") == CENTRAL, "adapter %r" % d.get("adapter"))
check(d.get("address_type") == "public", "address_type %r, expected public (btvirt)" % d.get("address_type"))
check(d.get("name") == "TestAdvertisement", "name %r" % d.get("name"))
# btvirt reports no signal strength: HCI RSSI 127 ("not available"), which bluectl
# leaves out rather than print as a reading (every scan line here had "rssi":127 before)
check("rssi" not in d, "rssi %r printed, but the emulated controller reports 127 (not available)" % d.get("rssi"))
su = d.get("service_uuids") or []
check(u16("180d") in su and u16("180f") in su, "service_uuids %r lack 180d/180f (full 128-bit form)" % su)
check(d.get("manufacturer_data") == {"0xffff": "00010203"}, "manufacturer_data %r" % d.get("manufacturer_data"))
check(d.get("service_data") == {u16("9999"): "0001020304"}, "service_data %r" % d.get("service_data"))
check("tx_power" not in d or isinstance(d["tx_power"], int), "tx_power %r" % d.get("tx_power"))
check("flags" not in d or is_hex(d["flags"]), "flags %r" % d.get("flags"))
check(str(d.get("path", "")).startswith("/org/bluez/%s/dev_" % CENTRAL), "path %r" % d.get("path"))
'
c_scan_service_filter() {
  # --count 1 must end the scan: with no other limit, a scan that went on is
  # killed by bl's limit and fails (no timing asserted)
  bl scan --json --adapter "$CENTRAL" --service "$HR_SVC" --count 1
  expect_rc 0
  expect_json "$SCAN_EXPECT"
  expect_json 'n = len([l for l in lines if l.get("event") == "discovered"]); check(n == 1, "--count 1 but %d discovered events" % n)'
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
  # semantics, not speed: the scan lasted its --timeout (a hang is caught by bl's limit)
  awk -v s="$SECS" 'BEGIN { exit !(s >= 6) }' || fail "--timeout 6 ended the scan after ${SECS}s"
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
# central subcommands
# =====================================================================
c_connect() {
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  bz wait "$DEV" Connected true 10 || fail "bluetoothd does not show $DEV connected"
  bz wait "$DEV" ServicesResolved true 20 || fail "services not resolved after connect"
}
c_discover() {
  bl discover "$DEV" --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json "
svc = {}; chrc = {}; parent_of = {}
last_handle = 0
for l in lines:
    t = l.get('type'); h = l.get('handle')
    check(isinstance(h, int) and h > last_handle, 'handles not increasing at %r' % l)
    last_handle = h
    if t == 'service':
        check(l['path'].startswith('/org/bluez/%s/dev_' % CENTRAL), 'service path %r' % l['path'])
        cur_svc = l; svc[l['uuid']] = l
    elif t == 'characteristic':
        check(l.get('service') == cur_svc['uuid'] and l['path'].startswith(cur_svc['path'] + '/char'),
              'characteristic %s not under the service before it (%s)' % (l['uuid'], cur_svc['uuid']))
        cur_chr = l; chrc[l['uuid']] = l; parent_of[l['uuid']] = cur_svc['uuid']
    elif t == 'descriptor':
        check(l.get('characteristic') == cur_chr['uuid'] and l['path'].startswith(cur_chr['path'] + '/desc'),
              'descriptor %s not under the characteristic before it (%s)' % (l['uuid'], cur_chr['uuid']))
        parent_of.setdefault(l['uuid'], cur_chr['uuid'])
    else:
        check(False, 'unknown line type %r' % t)
tree = {'$HR_SVC': {'$HR_MEAS': ['notify'], '$BODY_LOC': ['read'], '$HR_CTRL': ['write']},
        '$BATT_SVC': {'$BATT_LVL': ['read', 'notify']},
        '$TEST_SVC': {'$TEST_CHR': None, '$TEST_ENC_CHR': None},
        '$LAB_SVC': {'$LAB_STREAM': ['read', 'notify'], '$LAB_CONTROL': ['read', 'write', 'write-without-response'],
                     '$LAB_LONG': ['read', 'write']}}
for s_uuid, chars in tree.items():
    check(s_uuid in svc and svc[s_uuid].get('primary') is True, 'primary service %s missing' % s_uuid)
    for c_uuid, flags in chars.items():
        check(parent_of.get(c_uuid) == s_uuid, 'characteristic %s under %r, expected %s' % (c_uuid, parent_of.get(c_uuid), s_uuid))
        if flags is not None:
            check(sorted(chrc[c_uuid]['flags']) == sorted(flags), '%s flags %r, expected %r' % (c_uuid, chrc[c_uuid]['flags'], flags))
check(parent_of.get('$TEST_DESC') == '$TEST_CHR', 'descriptor $TEST_DESC under %r' % parent_of.get('$TEST_DESC'))
say('%d services, %d characteristics' % (len(svc), len(chrc)))"
}
c_read_battery() {
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
  bl read "$DEV" "$BODY_LOC" "${DEV_OPTS[@]}"
  expect_rc 0
  # exactly the value and its meaning (the example's body sensor location is 0x01, "chest")
  [ "$(cat "$OUT")" = "01 (Chest)" ] || fail "stdout $(head -c 80 "$OUT" | od -An -c | tr -s ' ' | head -c 120), expected exactly 01 (Chest)"
}
read_value() { # UUID -> VALUE (hex) of `read --json`, into $VALUE
  bl read "$DEV" "$1" --json "${DEV_OPTS[@]}"
  expect_rc 0
  # (sed, not python: a python start costs seconds on a busy TCG guest)
  VALUE=$(sed -n 's/.*"value" *: *"\([0-9a-fA-F]*\)".*/\1/p' "$OUT" | head -1)
  grep -q '"value"' "$OUT" || fail "read --json output has no value"
}
c_write_read_back() {
  bl write "$DEV" "$TEST_CHR" 0x0102 --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  read_value "$TEST_CHR"
  [ "$VALUE" = 0102 ] || fail "read back $VALUE after writing 0102"
}
c_write_without_response() {
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
  # the example's heart rate control point accepts only 0x01
  # (its WriteValue raises org.bluez.Error.Failed("0x80"): ATT error 0x80 on the
  # wire, which the central's bluetoothd reports as org.bluez.Error.Failed)
  bl write "$DEV" "$HR_CTRL" 0x02 --with-response "${DEV_OPTS[@]}"
  expect_rc 1
  [ "$(wc -l < "$ERR")" = 1 ] || fail "stderr is not one line: $(_first_err)"
  grep -q '^bluectl: write 2a39 (Heart Rate Control Point) failed: .*ATT error: 0x80 (org.bluez.Error.Failed)$' "$ERR" \
    || fail "stderr does not name BlueZ's error and the ATT error: $(_first_err)"
  [ ! -s "$OUT" ] || fail "stdout not empty"
}
c_subscribe_heart_rate() {
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
  read_value "$LAB_LONG"
  local want; want=$(awk 'BEGIN { for (i = 0; i < 300; i++) printf "%02x", i % 256 }')
  [ "$VALUE" = "$want" ] || fail "long value: got ${#VALUE} hex digits, expected the 300-byte pattern"
}
c_long_write() {
  local v; v=$(awk 'BEGIN { for (i = 0; i < 300; i++) printf "%02x", (255 - i + 512) % 256 }')
  bl write "$DEV" "$LAB_LONG" "0x$v" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  read_value "$LAB_LONG"
  [ "$VALUE" = "$v" ] || fail "read back ${#VALUE} hex digits, not the 300 bytes written"
}
c_stream_burst() {
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
# Forget the bond on both sides: the peripheral's adapter keeps its own, and
# with it a later connection is encrypted with the old keys, or the pairing
# asked again (and refused, when the lab agent is told to) before bluectl acts.
forget_bond() { # [DEVICE [ITS_ADAPTER]] (default: $DEV on $PERIPH_ADAPTER)
  local dev=${1:-$DEV} its=${2:-$PERIPH_ADAPTER}
  bz remove "$dev" || note "remove: the central did not know $dev"
  CENTRAL=$its bz remove "$CENTRAL_ADDR" || note "remove: the peripheral ($its) did not know the central"
}
c_pair() {
  # forget the bond, then connect --pair: bluectl scans for the device, connects and
  # calls Device1.Pair with its own agent registered (the lab's default agent answers for hci0)
  forget_bond
  bl connect "$DEV" --pair --json --timeout 45 "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json 'check(lines and lines[0].get("paired") is True, "paired %r" % (lines[0].get("paired") if lines else None))'
  bz wait "$DEV" Paired true 5 || fail "bluetoothd does not show the device paired"
}
# Pairing on demand against the real bluetoothd. An encrypted write makes
# bluetoothd raise the link's security by itself, and the lab's default agent
# (which must answer the peripheral's half of any pairing: one bluetoothd
# serves both sides, src/device.c new_auth asks agent_get(NULL)) would accept.
# Here it refuses that first request (agent.py's fault injection), so the
# automatic attempt fails and only bluectl's own pairing on demand -- its
# agent registered, Device1.Pair, the write again -- can succeed.
pair_on_demand() {
  local a0
  forget_bond
  a0=$(wc -l < "$LAB_OUT/agent.log")
  touch /run/lab/agent-refuse-next
  BLUECTL_DEBUG=1 bl write "$DEV" "$TEST_ENC_CHR" 0x0badcafe --with-response "${DEV_OPTS[@]}"
  rm -f /run/lab/agent-refuse-next
  tail -n +"$((a0 + 1))" "$LAB_OUT/agent.log" | sed 's/^/# lab agent: /'
  expect_rc 0
  [ -s "$OUT" ] && fail "write printed to stdout: $(head -c 200 "$OUT")"
  tail -n +"$((a0 + 1))" "$LAB_OUT/agent.log" | grep -q "REFUSED" || fail "bluetoothd's own pairing attempt never reached the lab's agent"
  grep -q "agent: registered" "$ERR" || fail "bluectl registered no agent"
  grep -q "pair $DEV: Device1.Pair" "$ERR" || fail "bluectl did not pair on demand"
  bz wait "$DEV" Paired true 5 || fail "bluetoothd does not show the device paired"
  read_value "$TEST_ENC_CHR"
  [ "$VALUE" = 0badcafe ] || fail "read back $VALUE from the encrypted characteristic"
}
c_encrypted_write_read() {
  pair_on_demand
}
c_extra_pair_on_demand() {
  # Exploration, not in CI: pair_on_demand LAB_PAIR_ROUNDS times in one boot
  # (how the figure in Tests/Lab/README.md was measured).
  local i n=${LAB_PAIR_ROUNDS:-6}
  for i in $(seq 1 "$n"); do
    note "round $i of $n"
    pair_on_demand   # a failure ends the check, naming the round above it
  done
}
c_info() {
  bl info "$DEV" --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json '
d = lines[0] if lines else {}
check(PERIPH_ADDR in json.dumps(d), "info lacks the address")
check(d.get("connected") is True, "connected %r, expected true" % d.get("connected"))'
}
c_disconnect() {
  bl disconnect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  bz wait "$DEV" Connected false 10 || fail "bluetoothd still shows $DEV connected"
}
c_read_own_connection() {
  # not connected now: read connects, reads, and disconnects the connection it made
  bl disconnect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  bz wait "$DEV" Connected false 10 || fail "device still connected before the check"
  bl read "$DEV" battery_level --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json 'check(is_hex(lines[0].get("value"), 1), "value %r" % lines[0].get("value"))'
  bz wait "$DEV" Connected false 10 || fail "bluectl left its own connection up"
}
c_subscribe_disconnect() {
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
# The lab peripheral's stream state from its control characteristic (either
# peripheral: DEVICE, default $DEV): STREAM_SENT (values sent in the last
# burst), STREAM_RUNNING, STREAM_NOTIFYING (0/1).
stream_state() { # [DEVICE] -> 0, or 1 when the control characteristic could not be read
  bl read "${1:-$DEV}" "$LAB_CONTROL" --json "${DEV_OPTS[@]}"
  [ "$RC" = 0 ] || return 1
  local v; v=$(sed -n 's/.*"value" *: *"\([0-9a-fA-F]*\)".*/\1/p' "$OUT" | head -1)
  [ ${#v} = 20 ] || return 1
  STREAM_SENT=$((16#${v:14:2}${v:12:2}${v:10:2}${v:8:2}))
  STREAM_RUNNING=$((16#${v:16:2})); STREAM_NOTIFYING=$((16#${v:18:2}))
}
wait_stream() { # notifying|done SECS [DEVICE] (a failed read is tried again: bluetoothd may be restarting)
  local end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ]; do
    if stream_state "${3:-$DEV}"; then
      case $1 in
        notifying) [ "$STREAM_NOTIFYING" = 1 ] && return 0;;
        done) [ "$STREAM_RUNNING" = 0 ] && return 0;;
      esac
    fi
    sleep 0.3
  done
  return 1
}
burst_hex() { printf '%02x%02x%02x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
# stream_start DEVICE N [MS]: the peripheral sends values 0..N-1, a burst (as
# fast as it goes; on hci2 about 800/s, see periph.py) or one every MS ms
stream_start() {
  bl write "$1" "$LAB_CONTROL" "0x$(burst_hex "$2")${3:+$(burst_hex "$3")}" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
}
# stream_stop DEVICE: stop its stream; STREAM_SENT is then how many it sent
stream_stop() {
  bl write "$1" "$LAB_CONTROL" --utf8 '' --with-response "${DEV_OPTS[@]}"   # empty: stop
  expect_rc 0
  stream_state "$1" || fail "cannot read the stream state of $1"
}
c_extra_stream_acquire() {
  local n=3000 sub_out=$CHECK_DIR/$CHECK_NAME.stream.out sub_err=$CHECK_DIR/$CHECK_NAME.stream.err pid src sup0
  note "AcquireNotify with --check-sequence: every value is printed or its loss reported by number"
  note "(BlueZ 5.66 drops AcquireNotify values under a burst, and bluetoothd 5.66 has crashed here during"
  note " such bursts: then the supervisor restarts it, bluectl --reconnect must carry on, and a second burst"
  note " must arrive whole after the reconnect)"
  sup0=$(_sup_lines)
  bl connect "$DEV" "${DEV_OPTS[@]}"   # a boot of its own: see extra_subscribe_reconnect
  expect_rc 0
  timeout -k 5 240 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --notify-via acquire --check-sequence u32 --reconnect --json "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_err" < /dev/null &
  pid=$!
  wait_stream notifying 40 || { kill $pid 2>/dev/null; cat "$sub_err"; fail "the peripheral never saw notifications enabled"; }
  local t0; t0=$(_now)
  bl write "$DEV" "$LAB_CONTROL" "0x$(burst_hex $n)" --with-response "${DEV_OPTS[@]}"
  [ "$(crashes_since "$sup0")" -gt 0 ] || expect_rc 0
  wait_stream done 90 || fail "the burst did not finish"
  note "peripheral sent $STREAM_SENT in $(_dt "$t0")s"
  local crashed; crashed=$(crashes_since "$sup0")
  if [ "$crashed" -gt 0 ]; then
    note "bluetoothd died $crashed time(s) during the burst: $(tail -n +"$((sup0 + 1))" "$SUPERVISOR_LOG" | tr '\n' ';')"
    local end=$((SECONDS + 120))
    until grep -q '"reconnected"' "$sub_out"; do
      kill -0 $pid 2>/dev/null || { cat "$sub_err"; fail "subscribe ended instead of reconnecting after bluetoothd died"; }
      [ $SECONDS -lt $end ] || { cat "$sub_err"; fail "no reconnected event within 120 s of bluetoothd's restart"; }
      sleep 0.5
    done
    wait_stream notifying 60 || fail "notifications not on again after bluetoothd's restart"
    note "after the restart: a paced burst of 300 (one every 5 ms) must arrive whole"
    bl write "$DEV" "$LAB_CONTROL" "0x$(burst_hex 300)$(burst_hex 5)" --with-response "${DEV_OPTS[@]}"
    expect_rc 0
    wait_stream done 60 || fail "the second burst did not finish"
  fi
  sleep 2
  kill -INT $pid; wait $pid; src=$?
  note "subscriber exit $src; stderr: $(head -c 400 "$sub_err")"
  [ $src = 130 ] || fail "subscribe exited $src on SIGINT, expected 130"
  grep -q "sequence check of $LAB_STREAM" "$sub_err" || fail "no sequence summary on stderr"
  OUT=$sub_out
  expect_json "
N = $n
crashed = $crashed > 0
# the first segment: up to the first disconnected event (all of it without a crash)
first = []
for l in lines:
    if l.get('event') == 'disconnected': break
    first.append(l)
seqs = []
reported = 0
for l in first:
    if l.get('event') == 'gap': reported += l['missing']
    elif l.get('event') == 'late': reported -= 1
    elif 'value' in l:
        v = bytes.fromhex(l['value'])
        check(len(v) == 20, 'value of %d bytes' % len(v))
        seqs.append(int.from_bytes(v[:4], 'little'))
check(seqs, 'no values')
top = max(seqs)
missing = len(set(range(top + 1)) - set(seqs))
say('acquire: %d of %d values, %d missing before the last (%d reported), %d lost at the end%s' % (
    len(seqs), N, missing, reported, N - 1 - top, ' (bluetoothd died)' if crashed else ''))
check(len(seqs) == len(set(seqs)), 'duplicates')
check(missing == reported, 'missing %d but %d reported' % (missing, reported))
if crashed:
    events = [l['event'] for l in lines if l.get('event') in ('disconnected', 'reconnected')]
    check(events and events == ['disconnected', 'reconnected'] * (len(events) // 2), 'events %s' % events)
    last = [i for i, l in enumerate(lines) if l.get('event') == 'reconnected'][-1]
    after = [int.from_bytes(bytes.fromhex(l['value'])[:4], 'little') for l in lines[last + 1:] if 'value' in l]
    check(after == list(range(300)), 'after the restart: %d values, not 0..299 in order' % len(after))"
}
c_extra_subscribe_reconnect() {
  local sub_out=$CHECK_DIR/$CHECK_NAME.sub.out sub_err=$CHECK_DIR/$CHECK_NAME.sub.err pid src
  note "subscribe --reconnect; the peripheral (hci0) powers off and on: the gap is reported, values resume"
  # A boot of its own: connect first, as the soak does. Otherwise the stream
  # reads below may make the connection, and a bluectl read disconnects a
  # connection it made, under the subscriber being set up.
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  timeout -k 5 170 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --reconnect --json --timeout 30 "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_err" < /dev/null &
  pid=$!
  wait_stream notifying 40 || { kill $pid 2>/dev/null; cat "$sub_err"; fail "the peripheral never saw notifications enabled"; }
  local t0; t0=$(_now)
  adapter_power "$PERIPH_ADAPTER" off || fail "cannot power $PERIPH_ADAPTER off"
  local end=$((SECONDS + 40))
  until grep -q '"disconnected"' "$sub_out"; do [ $SECONDS -lt $end ] || fail "no disconnected event"; sleep 0.3; done
  note "disconnected reported after $(_dt "$t0")s; powering hci0 on"
  sleep 2
  adapter_power "$PERIPH_ADAPTER" on || fail "cannot power $PERIPH_ADAPTER on"
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
# ---- exactly once, whoever else listens (bluetoothd 5.66 sends every
# subscriber one Value signal per StartNotify session and one per read:
# docs/notifications.md)
# seq_exact FILE N KIND [DEVICE]: FILE holds every sequence number 0..N-1
# exactly once, in order; KIND json (bluectl --json lines) or hex (one value
# per line); with DEVICE only the json lines whose "device" is DEVICE count
seq_exact() {
  "$PY" -I - "$1" "$2" "$3" "${4:-}" <<'EOF2' || fail "$(basename "$1")${4:+ ($4)}: not every value exactly once"
import json, sys
path, n, kind, dev = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
seqs = []
for line in open(path):
    line = line.strip()
    if not line: continue
    if kind == 'json':
        l = json.loads(line)
        if 'value' not in l: continue
        if dev and l.get('device') != dev: continue
        line = l['value']
    seqs.append(int.from_bytes(bytes.fromhex(line)[:4], 'little'))
dups = len(seqs) - len(set(seqs)); missing = sorted(set(range(n)) - set(seqs))
print('%s%s: %d values, %d distinct, %d duplicates, %d missing' % (path, ' ' + dev if dev else '', len(seqs), len(set(seqs)), dups, len(missing)))
sys.exit(0 if seqs == list(range(n)) else 1)
EOF2
}
# join_and_burst N FIRST_PID OUT: beside the subscriber FIRST_PID, a bluectl
# subscriber into OUT, which must report sharing that session; then a burst of
# N values; waits for both: RA RB are their exit statuses.
join_and_burst() {
  local n=$1 pa=$2 b=$3 pb end
  timeout -k 5 120 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --count "$n" --json "${DEV_OPTS[@]}" > "$b" 2> "$b.err" < /dev/null &
  pb=$!
  end=$((SECONDS + 40))
  until grep -q '"shared_session"' "$b"; do
    kill -0 $pb 2>/dev/null || { cat "$b.err"; fail "the joining bluectl ended before sharing the session"; }
    [ $SECONDS -lt $end ] || { kill "$pa" $pb; cat "$b.err"; fail "the joining bluectl never reported sharing the session"; }
    sleep 0.3
  done
  bl write "$DEV" "$LAB_CONTROL" "0x$(burst_hex "$n")" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  wait "$pa"; RA=$?; wait $pb; RB=$?
  note "exits: first $RA, joining bluectl $RB; its stderr: $(head -c 300 "$b.err")"
}
c_subscribe_two_bluectl() {
  local n=300 a=$CHECK_DIR/$CHECK_NAME.a.out b=$CHECK_DIR/$CHECK_NAME.b.out pa
  note "two bluectl subscribers on one characteristic: the second shares the first's session; each prints every value once"
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  timeout -k 5 120 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --count $n --json "${DEV_OPTS[@]}" > "$a" 2> "$a.err" < /dev/null &
  pa=$!
  wait_stream notifying 40 || { kill $pa; fail "the first subscriber never subscribed"; }
  join_and_burst $n $pa "$b"
  [ $RA = 0 ] && [ $RB = 0 ] || fail "subscribers exited $RA and $RB"
  seq_exact "$a" $n json
  seq_exact "$b" $n json
  ! grep -q '"shared_session"' "$a" || fail "the first subscriber says it shared a session"
}
c_subscribe_beside_python() {
  local n=300 a=$CHECK_DIR/$CHECK_NAME.py.out b=$CHECK_DIR/$CHECK_NAME.bl.out pa
  note "a python3-dbus subscriber (StartNotify) first, then bluectl: bluectl shares its session; both see every value once"
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  "$PY" -I "$HERE/pysub.py" "$CENTRAL" "$DEV" "$LAB_STREAM" $n 120 > "$a" 2> "$a.err" < /dev/null &
  pa=$!
  wait_stream notifying 60 || { kill $pa; cat "$a.err"; fail "the python subscriber never subscribed"; }
  join_and_burst $n $pa "$b"
  [ $RA = 0 ] && [ $RB = 0 ] || fail "subscribers exited python $RA, bluectl $RB"
  seq_exact "$a" $n hex
  seq_exact "$b" $n json
}
c_subscribe_read_by_other() {
  local n=150 a=$CHECK_DIR/$CHECK_NAME.sub.out pa ra i reads=0
  note "bluectl subscribed while another bluectl reads the characteristic: the reads add no line"
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  timeout -k 5 120 "$BLUECTL" subscribe "$DEV" "$LAB_STREAM" --count $n --json "${DEV_OPTS[@]}" > "$a" 2> "$a.err" < /dev/null &
  pa=$!
  wait_stream notifying 40 || { kill $pa; fail "the subscriber never subscribed"; }
  # one value every 30 ms (~4.5 s), read three times meanwhile
  bl write "$DEV" "$LAB_CONTROL" "0x$(burst_hex $n)$(burst_hex 30)" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  for i in 1 2 3; do
    bl read "$DEV" "$LAB_STREAM" --json "${DEV_OPTS[@]}"
    expect_rc 0
    reads=$((reads + 1))
  done
  wait $pa; ra=$?
  note "subscriber exit $ra after $reads reads; stderr: $(head -c 300 "$a.err")"
  [ $ra = 0 ] || fail "subscribe exited $ra"
  stream_state && [ "$STREAM_RUNNING" = 1 ] && note "(the stream was still running when the subscriber had its $n values)"
  seq_exact "$a" $n json
}
# =====================================================================
# the second peripheral (hci2): a static random address
# =====================================================================
# With the commands bluectl has: found by a scan as a random address, its
# services resolve (a read of the long characteristic), notifications flow.
c_periph2_scan_random() {
  [ "$PERIPH2_ADDR_TYPE" = random ] || fail "PERIPH2_ADDR_TYPE=$PERIPH2_ADDR_TYPE, expected random"
  note "$PERIPH2_ADAPTER's LE identity: $(adapter_identity "$PERIPH2_ADAPTER")"
  bl scan --json --adapter "$CENTRAL" --name "$ADV2_NAME" --timeout "$SCAN_TIMEOUT" --count 1
  expect_rc 0
  expect_json "
d = one(lambda l: l.get('event') == 'discovered' and l.get('address') == PERIPH2_ADDR, 'event discovered, address ' + PERIPH2_ADDR)
check(d.get('address_type') == 'random', 'address_type %r, expected random' % d.get('address_type'))
check(d.get('name') == '$ADV2_NAME', 'name %r' % d.get('name'))
check('$LAB_SVC' in (d.get('service_uuids') or []), 'service_uuids %r lack $LAB_SVC' % d.get('service_uuids'))
check(d.get('path') == '/org/bluez/%s/dev_%s' % (CENTRAL, PERIPH2_ADDR.replace(':', '_')), 'path %r' % d.get('path'))"
  bz device "$DEV2" > "$CHECK_DIR/$CHECK_NAME.device.json"
  grep -q '"AddressType": "random"' "$CHECK_DIR/$CHECK_NAME.device.json" \
    || fail "bluetoothd's Device1.AddressType is not random: $(head -c 300 "$CHECK_DIR/$CHECK_NAME.device.json")"
}
c_periph2_read_long() {
  bl read "$DEV2" "$LAB_LONG" --json "${DEV_OPTS[@]}"
  expect_rc 0
  local want; want=$(awk 'BEGIN { for (i = 0; i < 300; i++) printf "%02x", i % 256 }')
  grep -q "\"value\":\"$want\"" "$OUT" || fail "long value of $DEV2: not the 300-byte pattern"
  bz wait "$DEV2" Connected false 10 || fail "bluectl left its own connection to $DEV2 up"
}
c_periph2_stream() {
  local n=300 sub_out=$CHECK_DIR/$CHECK_NAME.sub.out pid src
  note "subscribe to $DEV2's stream, a burst of $n: every value exactly once, in order"
  bl connect "$DEV2" "${DEV_OPTS[@]}"
  expect_rc 0
  timeout -k 5 120 "$BLUECTL" subscribe "$DEV2" "$LAB_STREAM" --count $n --json "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_out.err" < /dev/null &
  pid=$!
  wait_stream notifying 40 "$DEV2" || { kill $pid 2>/dev/null; cat "$sub_out.err"; fail "the subscription never became active"; }
  stream_start "$DEV2" $n
  wait $pid; src=$?
  note "subscriber exit $src; stderr: $(head -c 300 "$sub_out.err")"
  [ $src = 0 ] || fail "subscribe --count $n exited $src"
  seq_exact "$sub_out" $n json "$DEV2"
}

# =====================================================================
# the lifecycle (devices, pair, trust, untrust, block, unblock, unpair) and
# several devices in one subscribe, with faults injected into the stack.
# =====================================================================
# wait_lines FILE DEVICE WHAT N SECS [PID]: until FILE has N lines about
# DEVICE with WHAT ('"value"' or an event name); a dead PID ends the wait
count_lines() { # FILE DEVICE WHAT
  grep -E "\"device\": ?\"$2\"" "$1" 2>/dev/null | grep -cE "$3"
}
wait_lines() {
  local what=$3 end=$((SECONDS + $5))
  case $what in '"value"') ;; *) what="\"event\": ?\"$what\"";; esac
  until [ "$(count_lines "$1" "$2" "$what")" -ge "$4" ]; do
    [ -n "${6:-}" ] && ! kill -0 "$6" 2>/dev/null && { echo "the subscriber ended"; return 1; }
    [ $SECONDS -lt $end ] || { echo "timeout: $(count_lines "$1" "$2" "$what") of $4 lines $3 for $2 after $5 s"; return 1; }
    sleep 0.3
  done
}
# wait_seq FILE DEVICE SEQ SECS [PID]: until FILE has DEVICE's value number SEQ
wait_seq() {
  local end=$((SECONDS + $4))
  until grep -E "\"device\": ?\"$2\"" "$1" | grep -qE "\"value\": ?\"$(burst_hex "$3")"; do
    [ -n "${5:-}" ] && ! kill -0 "$5" 2>/dev/null && { echo "the subscriber ended"; return 1; }
    [ $SECONDS -lt $end ] || { echo "timeout: no value $3 of $2 after $4 s"; return 1; }
    sleep 0.3
  done
}
# Python for expect_json over a subscribe of several devices: items(dev) is
# what the output says of dev, in order; verify(dev, ...) asserts that its
# sequence numbers only rise (no duplicate, none out of order), that each
# jump (numbers missing) follows a reported reconnect or gap since the value
# before, that disconnected and reconnected alternate, and returns
# (numbers, events).
STREAMS_PY="
LAB_STREAM = '$LAB_STREAM'
def items(dev):
    out = []
    for l in lines:
        check(isinstance(l, dict) and 'time' in l and 'device' in l, 'line without time or device: %r' % (l,))
        if l['device'] != dev:
            continue
        if 'value' in l:
            check(l.get('characteristic') == LAB_STREAM, 'characteristic %r' % l.get('characteristic'))
            v = bytes.fromhex(l['value'])
            s = int.from_bytes(v[:4], 'little')
            check(len(v) == 20 and v[4:] == bytes((s + i) & 0xff for i in range(4, 20)), 'corrupt value %s' % l['value'])
            out.append(('v', s))
        else:
            check('event' in l, 'line neither value nor event: %r' % l)
            out.append(('e', l))
    return out
def verify(dev, first=0, last=None):
    seqs, events, since, prev = [], [], set(), first - 1
    for kind, x in items(dev):
        if kind == 'e':
            events.append(x)
            since.add(x['event'])
            if x['event'] == 'reconnected':
                check(isinstance(x.get('gap_seconds'), (int, float)), 'reconnected without gap_seconds: %r' % x)
            continue
        check(x > prev, '%s: value %d after %d (a duplicate or out of order)' % (dev, x, prev))
        if x != prev + 1:
            check('reconnected' in since or 'gap' in since,
                  '%s: values %d..%d missing, and no reconnect or gap reported between %d and %d' % (dev, prev + 1, x - 1, prev, x))
        seqs.append(x); prev = x; since = set()
    links = [e['event'] for e in events if e['event'] in ('disconnected', 'reconnected')]
    check(links == ['disconnected', 'reconnected'] * (len(links) // 2),
          '%s: disconnected and reconnected do not alternate (or the last loss was not followed by a reconnect): %s' % (dev, links))
    if last is not None:
        check(seqs and seqs[-1] == last, '%s: the last value is %s, expected %d' % (dev, seqs[-1] if seqs else None, last))
    say('%s: %d values (%s..%s), %d missing, events %s' % (dev, len(seqs), seqs[0] if seqs else '-', prev,
        (prev - first + 1 - len(seqs)) if seqs else 0, [e['event'] for e in events]))
    return seqs, events
"
# Pairing, trust, block and unpair of the random-address peripheral through
# bluectl, each step checked in bluetoothd's state and storage. The bond is
# forgotten on both sides first and last (the peripheral's adapter keeps its
# own: see forget_bond).
c_devices_pair_trust_unpair() {
  local d=$DEV2
  forget_bond "$d" "$PERIPH2_ADAPTER"
  bl connect "$d" "${DEV_OPTS[@]}"
  expect_rc 0
  bl devices "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json "
for l in lines:
    check(l.get('adapter') == CENTRAL, 'adapter %r' % l.get('adapter'))
    for k in ('address', 'address_type', 'name', 'alias', 'connected', 'paired', 'bonded', 'trusted', 'blocked',
              'services_resolved', 'service_uuids', 'path'):
        check(k in l, 'no %s in %r' % (k, l))
d = one(lambda l: l['address'] == PERIPH2_ADDR, 'address ' + PERIPH2_ADDR)
check(d['address_type'] == 'random', 'address_type %r, expected random' % d['address_type'])
check(d['connected'] is True and d['paired'] is False and d['bonded'] is False, 'connected/paired/bonded %r/%r/%r' % (d['connected'], d['paired'], d['bonded']))
check(d['trusted'] is False and d['blocked'] is False, 'trusted/blocked %r/%r' % (d['trusted'], d['blocked']))
check(d['services_resolved'] is True and '$LAB_SVC' in d['service_uuids'], 'services_resolved %r, service_uuids %r' % (d['services_resolved'], d['service_uuids']))
check(d['path'] == '/org/bluez/%s/dev_%s' % (CENTRAL, PERIPH2_ADDR.replace(':', '_')), 'path %r' % d['path'])
check(d['name'] == '$ADV2_NAME', 'name %r' % d['name'])"
  bl devices "${DEV_OPTS[@]}" --connected --service "$LAB_SVC" --json
  expect_rc 0
  expect_json 'one(lambda l: l["address"] == PERIPH2_ADDR, "--connected --service lists " + PERIPH2_ADDR)
check(all(l["connected"] is True and "'"$LAB_SVC"'" in l["service_uuids"] for l in lines), "a line not connected or without the service")'
  bl devices "${DEV_OPTS[@]}" --paired --json
  expect_rc 0
  expect_json 'check(not any(l["address"] == PERIPH2_ADDR for l in lines), "--paired lists the unpaired device")'
  # pair: the peripheral's half goes to the lab's default agent
  bl pair "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'check(len(lines) == 1, "%d lines" % len(lines)); l = lines[0]
check(fields(l, device=PERIPH2_ADDR, paired=True, already_paired=False, bonded=True), "pair: %r" % l)'
  bz wait "$d" Paired true 10 || fail "bluetoothd does not show $d paired"
  storage_note "$CENTRAL_ADDR" "$d"
  has_bond "$CENTRAL_ADDR" "$d" || fail "no key in /var/lib/bluetooth/$CENTRAL_ADDR/$d/info after pair"
  bl pair "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'l = lines[0]; check(fields(l, device=PERIPH2_ADDR, paired=True, already_paired=True), "pair again: %r" % l)'
  bl devices "${DEV_OPTS[@]}" --paired --bonded --json
  expect_rc 0
  expect_json 'd = one(lambda l: l["address"] == PERIPH2_ADDR, "--paired --bonded lists " + PERIPH2_ADDR); check(d["paired"] is True and d["bonded"] is True, "%r" % d)'
  # trust
  bl trust "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'l = lines[0]; check(fields(l, device=PERIPH2_ADDR, trusted=True, changed=True), "trust: %r" % l)'
  bz wait "$d" Trusted true 5 || fail "bluetoothd does not show $d trusted"
  bl trust "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'l = lines[0]; check(fields(l, device=PERIPH2_ADDR, trusted=True, changed=False), "trust again: %r" % l)'
  bl devices "${DEV_OPTS[@]}" --trusted --json
  expect_rc 0
  expect_json 'one(lambda l: l["address"] == PERIPH2_ADDR, "--trusted lists " + PERIPH2_ADDR); check(all(l["trusted"] is True for l in lines), "an untrusted device listed")'
  bl untrust "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'l = lines[0]; check(fields(l, device=PERIPH2_ADDR, trusted=False, changed=True), "untrust: %r" % l)'
  bz wait "$d" Trusted false 5 || fail "bluetoothd still shows $d trusted"
  bl devices "${DEV_OPTS[@]}" --trusted --json
  expect_rc 0
  expect_json 'check(not any(l["address"] == PERIPH2_ADDR for l in lines), "--trusted lists the untrusted device")'
  # block (bluetoothd drops the link) and unblock
  bl block "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'l = lines[0]; check(fields(l, device=PERIPH2_ADDR, blocked=True, changed=True), "block: %r" % l)'
  bz wait "$d" Blocked true 5 || fail "bluetoothd does not show $d blocked"
  bl devices "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'd = one(lambda l: l["address"] == PERIPH2_ADDR, PERIPH2_ADDR); check(d["blocked"] is True, "blocked %r" % d["blocked"])'
  bl unblock "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'l = lines[0]; check(fields(l, device=PERIPH2_ADDR, blocked=False, changed=True), "unblock: %r" % l)'
  bz wait "$d" Blocked false 5 || fail "bluetoothd still shows $d blocked"
  # unpair: the device, its bond and its GATT cache are gone
  has_gatt_cache "$CENTRAL_ADDR" "$d" || fail "no GATT cache of $d before unpair (its removal below would prove nothing)"
  bl unpair "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'check(len(lines) == 1 and fields(lines[0], device=PERIPH2_ADDR, removed=True), "unpair: %r" % lines)'
  storage_note "$CENTRAL_ADDR" "$d"
  ! has_bond "$CENTRAL_ADDR" "$d" || fail "the bond is still in /var/lib/bluetooth/$CENTRAL_ADDR/$d after unpair"
  [ ! -e "/var/lib/bluetooth/$CENTRAL_ADDR/$d" ] || fail "/var/lib/bluetooth/$CENTRAL_ADDR/$d still exists after unpair"
  ! has_gatt_cache "$CENTRAL_ADDR" "$d" || fail "the GATT cache ([Attributes] of /var/lib/bluetooth/$CENTRAL_ADDR/cache/$d) is still there after unpair"
  [ "$(bz device "$d")" = "{}" ] || fail "bluetoothd still knows $d after unpair"
  bl devices "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'check(not any(l["address"] == PERIPH2_ADDR for l in lines), "devices still lists the removed device")'
  bl unpair "$d" "${DEV_OPTS[@]}" --json
  expect_rc 0
  expect_json 'check(len(lines) == 1 and fields(lines[0], device=PERIPH2_ADDR, removed=False), "unpair of an unknown device: %r" % lines)'
  # the peripheral's side keeps its own bond: forget it for the checks after this one
  CENTRAL=$PERIPH2_ADAPTER bz remove "$CENTRAL_ADDR" || note "the peripheral ($PERIPH2_ADAPTER) did not know the central"
}
# One subscribe of both peripherals' streams, both paced (one value every
# 10 ms): --count N ends each device after N; every value of both, in order.
c_two_devices_stream() {
  local n=300 sub_out=$CHECK_DIR/$CHECK_NAME.sub.out pid src
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  bl connect "$DEV2" "${DEV_OPTS[@]}"
  expect_rc 0
  timeout -k 5 150 "$BLUECTL" subscribe "$DEV,$DEV2" "$LAB_STREAM" --count $n --json "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_out.err" < /dev/null &
  pid=$!
  wait_stream notifying 40 "$DEV" || { kill $pid 2>/dev/null; cat "$sub_out.err"; fail "$DEV: the subscription never became active"; }
  wait_stream notifying 40 "$DEV2" || { kill $pid 2>/dev/null; cat "$sub_out.err"; fail "$DEV2: the subscription never became active"; }
  stream_start "$DEV" $n 10
  stream_start "$DEV2" $n 10
  wait $pid; src=$?
  note "subscriber exit $src; stderr: $(head -c 300 "$sub_out.err")"
  [ $src = 0 ] || fail "subscribe --count $n of two devices exited $src"
  seq_exact "$sub_out" $n json "$DEV"
  seq_exact "$sub_out" $n json "$DEV2"
  OUT=$sub_out
  expect_json "
check(all(l.get('device') in (PERIPH_ADDR, PERIPH2_ADDR) for l in lines), 'a line about another device: %r' % [l for l in lines if l.get('device') not in (PERIPH_ADDR, PERIPH2_ADDR)][:1])
check(not any('event' in l and l['event'] in ('disconnected', 'reconnected') for l in lines), 'a link was lost')"
}
# subscribe --reconnect to both, both paced (one value every 50 ms); hci2
# powers off and on: hci2's device is reported disconnected then
# reconnected, and its values resume; the other device's numbers have no gap
# at all (unless bluetoothd died meanwhile: then only inside reported windows).
c_two_devices_power_cycle() {
  local sub_out=$CHECK_DIR/$CHECK_NAME.sub.out pid src sup0 last1 last2
  sup0=$(_sup_lines)
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  bl connect "$DEV2" "${DEV_OPTS[@]}"
  expect_rc 0
  timeout -k 5 280 "$BLUECTL" subscribe "$DEV,$DEV2" "$LAB_STREAM" --reconnect --json "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_out.err" < /dev/null &
  pid=$!
  wait_stream notifying 40 "$DEV" || { kill $pid 2>/dev/null; cat "$sub_out.err"; fail "$DEV: the subscription never became active"; }
  wait_stream notifying 40 "$DEV2" || { kill $pid 2>/dev/null; cat "$sub_out.err"; fail "$DEV2: the subscription never became active"; }
  stream_start "$DEV" 100000 50
  stream_start "$DEV2" 100000 50
  wait_lines "$sub_out" "$DEV2" '"value"' 20 40 $pid || fail "$DEV2: no 20 values before the power cycle"
  power_cycle "$PERIPH2_ADAPTER" 2 || fail "cannot power-cycle $PERIPH2_ADAPTER"
  note "$PERIPH2_ADAPTER's identity after: $(adapter_identity "$PERIPH2_ADAPTER")"
  wait_lines "$sub_out" "$DEV2" disconnected 1 40 $pid || fail "$DEV2: no disconnected event"
  wait_lines "$sub_out" "$DEV2" reconnected 1 120 $pid || { cat "$sub_out.err"; fail "$DEV2: no reconnected event within 120 s"; }
  # values of both after the reconnect, then both streams stop and every value sent must arrive
  local n1 n2
  n2=$(count_lines "$sub_out" "$DEV2" '"value"')
  wait_lines "$sub_out" "$DEV2" '"value"' $((n2 + 20)) 60 $pid || fail "$DEV2: values did not resume after the reconnect"
  stream_stop "$DEV"; last1=$((STREAM_SENT - 1))
  stream_stop "$DEV2"; last2=$((STREAM_SENT - 1))
  wait_seq "$sub_out" "$DEV" $last1 30 $pid || fail "$DEV: its last value ($last1) never came"
  wait_seq "$sub_out" "$DEV2" $last2 30 $pid || fail "$DEV2: its last value ($last2) never came"
  kill -INT $pid; wait $pid; src=$?
  note "subscriber exit $src; stderr: $(head -c 400 "$sub_out.err")"
  [ $src = 130 ] || fail "subscribe exited $src on SIGINT, expected 130"
  local crashed; crashed=$(crashes_since "$sup0")
  OUT=$sub_out
  expect_json "$STREAMS_PY
crashed = $crashed > 0
s1, e1 = verify(PERIPH_ADDR, last=$last1)
s2, e2 = verify(PERIPH2_ADDR, last=$last2)
check(any(e['event'] == 'disconnected' for e in e2) and any(e['event'] == 'reconnected' for e in e2), '$DEV2: no disconnected/reconnected pair: %s' % [e['event'] for e in e2])
if not crashed:
    check(s1 == list(range($last1 + 1)), '$DEV: not every value 0..$last1 in order while $DEV2 was power-cycled')
    check(not [e for e in e1 if e['event'] in ('disconnected', 'reconnected')], '$DEV: its link was reported lost: %s' % [e['event'] for e in e1])
else:
    say('bluetoothd died during the check: $DEV may have lost values, but only inside its reported windows')"
}
# subscribe --reconnect to both, both paced; SIGSEGV to bluetoothd mid-stream:
# the supervisor restarts it (the peripherals' streams go on: periph.py
# outlives bluetoothd), both devices are reported disconnected and then
# reconnected, and every value outside the reported windows arrives exactly
# once, in order.
c_two_devices_bluetoothd_segv() {
  local sub_out=$CHECK_DIR/$CHECK_NAME.sub.out pid src last1 last2 n1 n2
  bl connect "$DEV" "${DEV_OPTS[@]}"
  expect_rc 0
  bl connect "$DEV2" "${DEV_OPTS[@]}"
  expect_rc 0
  timeout -k 5 400 "$BLUECTL" subscribe "$DEV,$DEV2" "$LAB_STREAM" --reconnect --json "${DEV_OPTS[@]}" \
    > "$sub_out" 2> "$sub_out.err" < /dev/null &
  pid=$!
  wait_stream notifying 40 "$DEV" || { kill $pid 2>/dev/null; cat "$sub_out.err"; fail "$DEV: the subscription never became active"; }
  wait_stream notifying 40 "$DEV2" || { kill $pid 2>/dev/null; cat "$sub_out.err"; fail "$DEV2: the subscription never became active"; }
  stream_start "$DEV" 100000 50
  stream_start "$DEV2" 100000 50
  wait_lines "$sub_out" "$DEV" '"value"' 20 40 $pid || fail "$DEV: no 20 values before the kill"
  wait_lines "$sub_out" "$DEV2" '"value"' 20 40 $pid || fail "$DEV2: no 20 values before the kill"
  bluetoothd_segv 150 || fail "bluetoothd was not restarted with both peripherals"
  wait_lines "$sub_out" "$DEV" reconnected 1 150 $pid || { cat "$sub_out.err"; fail "$DEV: no reconnected event"; }
  wait_lines "$sub_out" "$DEV2" reconnected 1 150 $pid || { cat "$sub_out.err"; fail "$DEV2: no reconnected event"; }
  n1=$(count_lines "$sub_out" "$DEV" '"value"'); n2=$(count_lines "$sub_out" "$DEV2" '"value"')
  wait_lines "$sub_out" "$DEV" '"value"' $((n1 + 20)) 60 $pid || fail "$DEV: values did not resume after the restart"
  wait_lines "$sub_out" "$DEV2" '"value"' $((n2 + 20)) 60 $pid || fail "$DEV2: values did not resume after the restart"
  stream_stop "$DEV"; last1=$((STREAM_SENT - 1))
  stream_stop "$DEV2"; last2=$((STREAM_SENT - 1))
  wait_seq "$sub_out" "$DEV" $last1 30 $pid || fail "$DEV: its last value ($last1) never came"
  wait_seq "$sub_out" "$DEV2" $last2 30 $pid || fail "$DEV2: its last value ($last2) never came"
  kill -INT $pid; wait $pid; src=$?
  note "subscriber exit $src; stderr: $(head -c 400 "$sub_out.err")"
  [ $src = 130 ] || fail "subscribe exited $src on SIGINT, expected 130"
  OUT=$sub_out
  expect_json "$STREAMS_PY
for dev, last in ((PERIPH_ADDR, $last1), (PERIPH2_ADDR, $last2)):
    s, e = verify(dev, last=last)
    ev = [x['event'] for x in e]
    check('disconnected' in ev and 'reconnected' in ev, '%s: bluetoothd died, but no disconnected/reconnected: %s' % (dev, ev))"
}
c_unknown_device() {
  bl read 00:11:22:33:44:55 battery_level --json "${DEV_OPTS[@]}"
  expect_rc 68
}

# =====================================================================
# the peripheral role: bluectl serve / advertise on the server adapter
# ($SERVER, hci3: LE-only, nothing else registered on it), centrals on hci1
# (/work/peripheral-contract.md; issue 14)
# =====================================================================
SRV=${SERVER_ADDR:-}
SRV_ADAPTER=${SERVER:-}
EX=/usr/share/doc/bluez-test-scripts/examples
GATTC=$HERE/gattc.py
FL_SVC=b1ec7200-0000-4000-8000-000000000000
FL_READ=b1ec7200-0000-4000-8000-000000000001      # read, value 0102
FL_WRITE=b1ec7200-0000-4000-8000-000000000002     # write (request) only
FL_WWR=b1ec7200-0000-4000-8000-000000000003       # write-without-response only
FL_NOTIFY=b1ec7200-0000-4000-8000-000000000004    # notify only
FL_INDICATE=b1ec7200-0000-4000-8000-000000000005  # indicate only
FL_LONG=b1ec7200-0000-4000-8000-000000000006      # read, write; 300 bytes i & 0xff; descriptors 2901, ...a6
FL_LONG_DESC=b1ec7200-0000-4000-8000-0000000000a6
FL_ALL=b1ec7200-0000-4000-8000-000000000007       # read, write, write-without-response, notify, indicate

# need_server: the server adapter exists; the central forgets the server's
# device (a scan then reports it anew, with the advertisement of this check)
need_server() {
  [ -n "$SRV_ADAPTER" ] && [ -n "$SRV" ] || fail "no server adapter (SERVER=$SRV_ADAPTER SERVER_ADDR=$SRV): the lab needs btvirt -l4"
  bz remove "$SRV" || note "remove: $CENTRAL did not know $SRV"
}
# Background processes of a check are ended when it ends, however it ends (a
# serve left running would keep its registrations on $SERVER for the next check).
_BG=()
_bg_cleanup() {
  local p
  for p in "${_BG[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 0.5
  for p in "${_BG[@]}"; do kill -KILL "$p" 2>/dev/null; done
}
bg_track() { _BG+=("$1"); trap _bg_cleanup EXIT; }
# wait_out FILE ERE SECS [PID] [N]: until FILE has N (default 1) lines matching ERE; a dead PID ends the wait
wait_out() {
  local end=$((SECONDS + $3)) n=${5:-1}
  until [ "$(grep -cE -- "$2" "$1" 2>/dev/null)" -ge "$n" ]; do
    if [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; then
      [ "$(grep -cE -- "$2" "$1" 2>/dev/null)" -ge "$n" ] && return 0
      echo "wait for '$2' in $(basename "$1"): the process ended"; return 1
    fi
    [ $SECONDS -lt $end ] || { echo "timeout: $(grep -cE -- "$2" "$1" 2>/dev/null) of $n lines '$2' in $(basename "$1") after $3 s"; return 1; }
    sleep 0.2
  done
}
# wait_exit PID SECS: wait for a background process, at most SECS; sets WRC (124: still running, killed)
wait_exit() {
  local end=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    [ $SECONDS -lt $end ] || { kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null; WRC=124; return 1; }
    sleep 0.2
  done
  wait "$1"; WRC=$?
}
# serve_start SPEC ARGS...: `bluectl serve SPEC ARGS --timeout 600` in the
# background (SIGINT/SIGTERM at their defaults: a background job of a script
# would ignore SIGINT), stdin from a FIFO this shell holds open on fd 7
# (feed: `... >&7`); SERVE_PID SERVE_OUT SERVE_ERR; then waits (60 s) for its
# "serving" line.
serve_start() {
  local base=$CHECK_DIR/$CHECK_NAME.serve
  # (the FIFO on the guest's tmpfs: the output folder is 9p, where mkfifo fails)
  SERVE_OUT=$base.out SERVE_ERR=$base.err SERVE_IN=/tmp/$CHECK_NAME.serve.in
  rm -f "$SERVE_IN"; mkfifo "$SERVE_IN"
  echo "\$ bluectl serve $* --timeout 600   (background; stdin: a FIFO)"
  env --default-signal=INT,TERM "$BLUECTL" serve "$@" --timeout 600 < "$SERVE_IN" > "$SERVE_OUT" 2> "$SERVE_ERR" &
  SERVE_PID=$!
  bg_track $SERVE_PID
  exec 7> "$SERVE_IN"
  wait_out "$SERVE_OUT" '"event": ?"serving"' 60 $SERVE_PID || { cat "$SERVE_ERR"; fail "bluectl serve did not print its serving line"; }
  note "serving: $(head -1 "$SERVE_OUT")"
}
# serve_stop INT|TERM: the signal, then (20 s) its exit: SERVE_RC
serve_stop() {
  kill -"$1" $SERVE_PID
  wait_exit $SERVE_PID 20
  SERVE_RC=$WRC
  exec 7>&-
  note "serve exit $SERVE_RC after SIG$1; stderr: $(head -c 400 "$SERVE_ERR")"
  echo "# serve's stdout:"; cat "$SERVE_OUT"
}
# scan_start NAME: `bluectl scan` on the central for NAME in the background
# (SCAN_PID, SCAN_OUT), waits until hci1 is discovering. btvirt reports an
# advertisement when its set is enabled (and when a scan starts, but the
# kernel drops that one): so the scan runs before the advertiser starts.
scan_start() {
  SCAN_OUT=$CHECK_DIR/$CHECK_NAME.scan.out
  echo "\$ bluectl scan --adapter $CENTRAL --name $1 --count 1 --json --timeout 120   (background)"
  timeout -k 5 150 "$BLUECTL" scan --adapter "$CENTRAL" --name "$1" --count 1 --json --timeout 120 > "$SCAN_OUT" 2> "$SCAN_OUT.err" < /dev/null &
  SCAN_PID=$!
  bg_track $SCAN_PID
  bz wait-adapter Discovering true 30 || fail "$CENTRAL not discovering for the scan"
}
scan_wait() {
  wait_exit $SCAN_PID 150
  note "scan exit $WRC; stderr: $(head -c 300 "$SCAN_OUT.err")"
  [ $WRC = 0 ] || fail "bluectl scan for the advertised name exited $WRC"
  OUT=$SCAN_OUT
}
adv_instances() { _bz_prop "/org/bluez/$SRV_ADAPTER" org.bluez.LEAdvertisingManager1 ActiveInstances; }
wait_adv_instances() { # N SECS
  local end=$((SECONDS + $2))
  until [ "$(adv_instances)" = "$1" ]; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done
}
# reg_watch_start: dbus-monitor of the registrations sent to bluetoothd
# (GattManager1/LEAdvertisingManager1 Register*/Unregister*), into REG_LOG;
# reg_paths Register|Unregister: the object paths bluectl registered or
# unregistered (under /org/bluectl/, but not the lab's own /org/bluectl/lab)
reg_watch_start() {
  REG_LOG=$CHECK_DIR/$CHECK_NAME.registrations
  dbus-monitor --system "type='method_call',destination='org.bluez',interface='org.bluez.GattManager1'" \
    "type='method_call',destination='org.bluez',interface='org.bluez.LEAdvertisingManager1'" > "$REG_LOG" 2>&1 &
  bg_track $!
  sleep 0.5
}
reg_paths() {
  awk -v want="$1" '/member=(Register|Unregister)(Application|Advertisement)/ {
      m = $0; sub(/.*member=/, "", m); getline
      if ($0 ~ /object path/) { p = $0; sub(/.*object path "/, "", p); sub(/".*/, "", p)
        if (m ~ "^" want "(Application|Advertisement)$" && p ~ "^/org/bluectl/" && p !~ "^/org/bluectl/lab") print p } }' "$REG_LOG" | sort -u
}
# reg_all_undone: every registration of bluectl's was undone by bluectl itself
# (an UnregisterApplication/UnregisterAdvertisement call, not bluetoothd's
# clean-up after the process left)
reg_all_undone() {
  local r u
  r=$(reg_paths Register); u=$(reg_paths Unregister)
  note "registered: $(echo $r); unregistered: $(echo $u)"
  [ -n "$r" ] || fail "no registration of bluectl's seen on the bus (dbus-monitor: $(head -c 200 "$REG_LOG"))"
  [ "$r" = "$u" ] || fail "registered but never unregistered by bluectl: $(comm -23 <(echo "$r") <(echo "$u") | tr '\n' ' ')"
}
gattc() { # ARGS...: Tests/Lab/gattc.py on the central, logged like bl; GRC GOUT
  _BL_N=$((_BL_N + 1))
  GOUT=$CHECK_DIR/$CHECK_NAME.$_BL_N.gattc
  echo "\$ gattc.py $*"
  timeout -k 5 90 "$PY" -I "$GATTC" --adapter "$CENTRAL" "$@" > "$GOUT" 2> "$GOUT.err" < /dev/null
  GRC=$?
  echo "# exit $GRC"; [ -s "$GOUT" ] && head -c 3000 "$GOUT"; [ -s "$GOUT.err" ] && { echo "# stderr:"; head -c 1000 "$GOUT.err"; }
  return 0
}
# a serve event line of FILE as JSON checks: serve_json CODE (lines = serve's stdout)
serve_json() { local o=$OUT; OUT=$SERVE_OUT; expect_json "$1"; OUT=$o; }
seq_feed() { # CHARACTERISTIC N: N lines on serve's stdin, values uint32 LE 0..N-1
  awk -v c="$1" -v n="$2" 'BEGIN { for (i = 0; i < n; i++) printf "{\"characteristic\":\"%s\",\"value\":\"%02x%02x%02x%02x\"}\n", c, i % 256, int(i / 256) % 256, int(i / 65536) % 256, 0 }' >&7
}

# serve_stream CHARACTERISTIC N FILE WHAT: `bluectl subscribe --count N --json`
# on the central into FILE; once serve printed the subscription, N numbered
# values fed on serve's stdin must all arrive, in order
serve_stream() {
  local pid
  timeout -k 5 180 "$BLUECTL" subscribe "$SRV" "$1" --count "$2" --json "${DEV_OPTS[@]}" > "$3" 2> "$3.err" < /dev/null &
  pid=$!; bg_track $pid
  wait_out "$SERVE_OUT" "\"event\": ?\"subscribed\".*$1|$1.*\"event\": ?\"subscribed\"" 40 $SERVE_PID || { cat "$3.err"; fail "serve saw no subscription to $1 ($4)"; }
  bz wait-notifying "$SRV" "$1" 20 || fail "bluetoothd ($CENTRAL) does not show $1 notifying"
  seq_feed "$1" "$2"
  wait_exit $pid 180
  note "subscriber ($4) exit $WRC; stderr: $(head -c 300 "$3.err")"
  [ $WRC = 0 ] || fail "subscribe --count $2 ($4) exited $WRC after $(grep -c '"value"' "$3") values"
  seq_exact "$3" "$2" json
}

# BlueZ's own example-gatt-client against bluectl serve of a heart-rate
# database: it reads the body sensor location, subscribes to the
# measurement and prints what serve is fed on stdin; the control point is
# written by busctl (the example never writes it). After SIGINT nothing of
# bluectl stays registered.
c_serve_heart_rate_example_client() {
  need_server
  local ex_out=$CHECK_DIR/$CHECK_NAME.example.out ex_pid name i hr cp hrs app
  reg_watch_start
  scan_start bluectl-hr
  serve_start Tests/Lab/heart-rate.json --adapter "$SRV_ADAPTER" --advertise --name bluectl-hr --json
  serve_json "
s = lines[0]
check(fields(s, event='serving', adapter=SERVER, address=SERVER_ADDR, advertising=True, name='bluectl-hr'), 'serving line %r' % s)
check(s.get('services') == [u16('180d')], 'services %r' % s.get('services'))"
  name=$(bz bus-name $SERVE_PID)
  note "serve's bus name: ${name:-?}"
  [ -n "$name" ] || fail "serve (pid $SERVE_PID) owns no bus name"
  # its application, as bluetoothd sees it: GetManagedObjects at the path it registered
  # (the system bus lets root call ObjectManager on it, not Introspect: no busctl tree)
  app=$(reg_paths Register | grep -v '/adv' | head -1)
  note "application registered: ${app:-none}"
  [ -n "$app" ] || fail "no RegisterApplication of serve's seen on the bus"
  busctl --system call "$name" "$app" org.freedesktop.DBus.ObjectManager GetManagedObjects > "$CHECK_DIR/$CHECK_NAME.objects" 2>&1 \
    || fail "GetManagedObjects on $name $app: $(head -c 200 "$CHECK_DIR/$CHECK_NAME.objects")"
  for i in 180d 2a37 2a38 2a39; do
    grep -q "0000$i-0000-1000-8000-00805f9b34fb" "$CHECK_DIR/$CHECK_NAME.objects" || fail "serve's objects lack $i: $(head -c 300 "$CHECK_DIR/$CHECK_NAME.objects")"
  done
  scan_wait
  expect_json "
d = one(lambda l: l.get('event') == 'discovered' and l.get('address') == SERVER_ADDR, 'discovered ' + SERVER_ADDR)
check(d.get('name') == 'bluectl-hr', 'name %r' % d.get('name'))
check(u16('180d') in (d.get('service_uuids') or []), 'service_uuids %r' % d.get('service_uuids'))"
  gattc "$SRV" connect
  [ $GRC = 0 ] || fail "hci1 could not connect to $SRV (gattc.py connect exited $GRC)"
  # the example takes the first Heart Rate service among ALL of bluetoothd's objects
  note "removed from $CENTRAL (a cached heart rate service): $(bz remove-with-service 180d "$SRV")"
  hrs=$(bz services 180d)
  [[ $hrs == "[\"/org/bluez/$CENTRAL/dev_${SRV//:/_}/service"* && $hrs != *,* ]] \
    || fail "heart rate services other than bluectl's (or none) among bluetoothd's objects: $hrs"
  "$PY" -u "$EX/example-gatt-client" > "$ex_out" 2>&1 < /dev/null &
  ex_pid=$!
  bg_track $ex_pid
  wait_out "$ex_out" 'Heart Rate Service found: /org/bluez/'"$CENTRAL"'/dev_'"${SRV//:/_}"'/' 60 $ex_pid || { cat "$ex_out"; fail "example-gatt-client did not find bluectl's service"; }
  wait_out "$ex_out" '^Body sensor location value: Chest$' 30 $ex_pid || { cat "$ex_out"; fail "example-gatt-client did not read the body sensor location (01, Chest)"; }
  wait_out "$ex_out" '^HR Measurement notifications enabled$' 30 $ex_pid || { cat "$ex_out"; fail "example-gatt-client's StartNotify did not succeed"; }
  wait_out "$SERVE_OUT" '"event": ?"subscribed".*2a37|2a37.*"event": ?"subscribed"' 20 $SERVE_PID || fail "serve printed no subscribed event for 2a37"
  for i in 0 1 2 3 4; do
    hr=$((70 + i))
    printf '{"characteristic":"2a37","value":"06%02x"}\n' $hr >&7
  done
  wait_out "$ex_out" '^	HR: 7[0-4]$' 30 $ex_pid 5 || { cat "$ex_out"; fail "example-gatt-client did not get the 5 measurements fed to serve"; }
  grep '^	HR: ' "$ex_out" | tr -d '\t' | tr '\n' ' ' | grep -q '^HR: 70 HR: 71 HR: 72 HR: 73 HR: 74 $' \
    || fail "measurements not 70..74 in order: $(grep '^	HR: ' "$ex_out" | tr -d '\t' | tr '\n' ' ')"
  grep -q '^	Sensor Contact status: contact detected$' "$ex_out" || fail "the flags (06) were not decoded as contact detected"
  # the control point: busctl (a plain D-Bus client) writes 01 with a write request
  cp=$("$PY" -I "$GATTC" --adapter "$CENTRAL" "$SRV" find 2a39) || fail "no control point under $SRV"
  echo "\$ busctl call org.bluez $cp org.bluez.GattCharacteristic1 WriteValue aya{sv} 1 1 1 type s request"
  busctl --system call org.bluez "$cp" org.bluez.GattCharacteristic1 WriteValue 'aya{sv}' 1 1 1 type s request \
    || fail "busctl's write of the control point failed"
  wait_out "$SERVE_OUT" '"event": ?"write"' 20 $SERVE_PID || fail "serve printed no write event"
  serve_json "
w = one(lambda l: l.get('event') == 'write', 'a write event')
check(fields(w, characteristic=u16('2a39'), value='01', central=CENTRAL_ADDR, offset=0) and 'type' not in w,
      'write event %r (bluetoothd 5.66 does not tell a server how a central wrote: no type)' % w)
r = one(lambda l: l.get('event') == 'read', 'a read event (the example read 2a38)')
check(fields(r, characteristic=u16('2a38'), central=CENTRAL_ADDR, offset=0), 'read event %r' % r)
check(all('time' in l for l in lines[1:]), 'an event without time')"
  # the example ends: bluetoothd drops its notify session, serve hears StopNotify
  kill -TERM $ex_pid; wait_exit $ex_pid 10
  wait_out "$SERVE_OUT" '"event": ?"unsubscribed"' 20 $SERVE_PID || fail "serve printed no unsubscribed event after the client went away"
  serve_stop INT
  [ "$SERVE_RC" = 130 ] || fail "serve exited $SERVE_RC on SIGINT, expected 130"
  # nothing of bluectl stays registered: serve undid each registration itself,
  # its bus name is gone, the adapter has no advertisement
  reg_all_undone
  ! busctl --system call "$name" "$app" org.freedesktop.DBus.ObjectManager GetManagedObjects > /dev/null 2>&1 \
    || fail "serve's objects still answer on $name after it exited"
  wait_adv_instances 0 10 || fail "$SRV_ADAPTER's ActiveInstances $(adv_instances) after serve exited, expected 0"
  # the central, still connected, loses the service (Service Changed)
  bz wait "$SRV" Connected true 3 || note "$CENTRAL no longer connected to $SRV"
  local end=$((SECONDS + 30))
  until [ "$(bz services 180d)" = "[]" ]; do
    [ $SECONDS -lt $end ] || fail "$CENTRAL still sees a heart rate service 30 s after serve exited: $(bz services 180d)"
    sleep 0.5
  done
  gattc "$SRV" disconnect
}

# bluectl's central against bluectl serve: every flag combination, the ATT
# errors, writes by type, 500 notifications and 500 indications fed on stdin.
c_serve_vs_bluectl_central() {
  need_server
  local sub_out=$CHECK_DIR/$CHECK_NAME.sub.out n=500 v
  reg_watch_start
  scan_start bluectl-flags
  serve_start Tests/Lab/serve-flags.json --adapter "$SRV_ADAPTER" --advertise --name bluectl-flags --json
  scan_wait
  expect_json "
d = one(lambda l: l.get('event') == 'discovered' and l.get('address') == SERVER_ADDR, 'discovered ' + SERVER_ADDR)
check(d.get('name') == 'bluectl-flags', 'name %r' % d.get('name'))
check('$FL_SVC' in (d.get('service_uuids') or []), 'service_uuids %r' % d.get('service_uuids'))"
  bl connect "$SRV" "${DEV_OPTS[@]}"
  expect_rc 0
  bl discover "$SRV" --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json "
chrc = {}; parent = {}; cur = None
for l in lines:
    if l.get('type') == 'characteristic':
        cur = l['uuid']; chrc[cur] = l
    elif l.get('type') == 'descriptor':
        parent[l['uuid']] = l.get('characteristic')
want = {'$FL_READ': ['read'], '$FL_WRITE': ['write'], '$FL_WWR': ['write-without-response'], '$FL_NOTIFY': ['notify'],
        '$FL_INDICATE': ['indicate'], '$FL_LONG': ['read', 'write'],
        '$FL_ALL': ['read', 'write', 'write-without-response', 'notify', 'indicate']}
for u, f in want.items():
    check(u in chrc, 'characteristic %s missing' % u)
    check(sorted(chrc[u].get('flags', [])) == sorted(f), '%s flags %r, expected %r' % (u, chrc[u].get('flags'), f))
    check(chrc[u].get('service') == '$FL_SVC', '%s under %r' % (u, chrc[u].get('service')))
check(parent.get(u16('2901')) == '$FL_LONG', '2901 under %r' % parent.get(u16('2901')))
check(parent.get('$FL_LONG_DESC') == '$FL_LONG', '$FL_LONG_DESC under %r' % parent.get('$FL_LONG_DESC'))"
  # reads: the static value; a read of a write-only characteristic is refused:
  # by bluectl from the flags (exit 77, before any request), and on the wire
  # (gattc.py asks anyway) by ATT's Read Not Permitted from hci3's bluetoothd
  bl read "$SRV" "$FL_READ" --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json 'check(lines[0].get("value") == "0102", "value %r" % lines[0].get("value"))'
  wait_out "$SERVE_OUT" '"event": ?"read"' 10 $SERVE_PID || fail "serve printed no read event"
  bl read "$SRV" "$FL_WRITE" "${DEV_OPTS[@]}"
  expect_rc 77
  [ "$(wc -l < "$ERR")" = 1 ] || fail "stderr is not one line: $(_first_err)"
  grep -qx "bluectl: characteristic $FL_WRITE is not readable (flags: write)" "$ERR" \
    || fail "the read of a write-only characteristic: $(_first_err)"
  [ ! -s "$OUT" ] || fail "stdout not empty"
  gattc "$SRV" read "$FL_WRITE"
  [ $GRC = 1 ] && grep -q 'org.bluez.Error.NotPermitted: Read not permitted' "$GOUT.err" \
    || fail "ReadValue of the write-only characteristic: exit $GRC, $(head -c 200 "$GOUT.err") (expected BlueZ's NotPermitted for ATT's Read Not Permitted)"
  # writes, each printed by serve with its type
  bl write "$SRV" "$FL_WRITE" 0xa1a2 --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  bl write "$SRV" "$FL_WWR" 0xb1b2 --without-response "${DEV_OPTS[@]}"
  expect_rc 0
  # a write request to the write-without-response characteristic: bluectl
  # notes the flags and tries; bluetoothd 5.66's server takes an ATT Write
  # Request whatever the properties say (hci3 answers Write Response)
  bl write "$SRV" "$FL_WWR" 0xc1c2 --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  grep -q "does not list write-with-response" "$ERR" || fail "no note on stderr about the flags: $(_first_err)"
  v=$(awk 'BEGIN { for (i = 0; i < 300; i++) printf "%02x", (255 - i + 512) % 256 }')
  bl write "$SRV" "$FL_LONG" "0x$v" --with-response "${DEV_OPTS[@]}"
  expect_rc 0
  read_srv() { bl read "$SRV" "$1" --json "${DEV_OPTS[@]}"; expect_rc 0; VALUE=$(sed -n 's/.*"value" *: *"\([0-9a-fA-F]*\)".*/\1/p' "$OUT" | head -1); }
  read_srv "$FL_LONG"
  [ "$VALUE" = "$v" ] || fail "read back ${#VALUE} hex digits from the long characteristic, not the 300 bytes written"
  wait_out "$SERVE_OUT" '"event": ?"write"' 20 $SERVE_PID 3 || fail "serve printed fewer than 3 write events"
  serve_json "
w = [l for l in lines if l.get('event') == 'write']
check(all(l.get('central') == CENTRAL_ADDR and 'time' in l for l in w), 'write events without the central or time: %r' % w)
def one_write(c, value):
    x = [l for l in w if l.get('characteristic') == c]
    check(x and x[0].get('value') == value and 'type' not in x[0], '%s: write events %r, expected %s without a type (5.66 does not say)' % (c, [(l.get('value', '')[:16], l.get('type')) for l in x], value[:16]))
one_write('$FL_WRITE', 'a1a2')
one_write('$FL_WWR', 'b1b2')
longw = [l for l in w if l.get('characteristic') == '$FL_LONG']
check(''.join(l['value'] for l in sorted(longw, key=lambda l: l.get('offset', 0))) == '$v', 'the long write: %d events, not the 300 bytes' % len(longw))"
  # 500 notifications, then 500 indications, fed on stdin: all, in order
  serve_stream "$FL_NOTIFY" $n "$sub_out" notify
  serve_stream "$FL_INDICATE" $n "$sub_out.ind" indicate
  wait_out "$SERVE_OUT" "\"event\": ?\"confirmed\"" 30 $SERVE_PID $n || fail "serve printed fewer than $n confirmed events"
  serve_stop INT
  [ "$SERVE_RC" = 130 ] || fail "serve exited $SERVE_RC on SIGINT, expected 130"
  reg_all_undone
  wait_adv_instances 0 10 || fail "$SRV_ADAPTER's ActiveInstances $(adv_instances) after serve exited, expected 0"
  bl disconnect "$SRV" "${DEV_OPTS[@]}"
  expect_rc 0
  # last (the streams above tell more when this fails): the write request of
  # c1c2 (an ATT Write Request on the wire, btmon.log) must not be printed as a command
  serve_json "
c = [l for l in lines if l.get('event') == 'write' and l.get('value') == 'c1c2']
check(len(c) == 1 and 'type' not in c[0], 'the ATT Write Request of c1c2 printed as type %r (a request on the wire; no guess from the flags)' % [l.get('type') for l in c])"
}

# bluectl serve survives bluetoothd 5.66 dying (SIGSEGV, as its own crashes
# do): serve says bluetoothd stopped, registers the service and the
# advertisement again once the supervisor has restarted it, and a central
# reads the served value again; at SIGINT every registration is undone.
c_serve_bluetoothd_segv() {
  need_server
  reg_watch_start
  # the central's scan first: btvirt reports an advertisement when it is switched on (scan_start)
  scan_start bluectl-segv
  serve_start "$REPO/Tests/Lab/heart-rate.json" --adapter "$SERVER" --advertise --name bluectl-segv --json
  scan_wait
  bl read "$SRV" 2a38 --json "${DEV_OPTS[@]}"
  expect_rc 0
  bluetoothd_segv 150 || fail "bluetoothd was not restarted"
  wait_out "$SERVE_OUT" '"event": ?"bluetoothd_stopped"' 30 $SERVE_PID || { cat "$SERVE_ERR"; fail "serve did not say bluetoothd stopped"; }
  wait_out "$SERVE_OUT" '"event": ?"restored"' 90 $SERVE_PID || { cat "$SERVE_ERR"; fail "serve did not register again after the restart"; }
  # (the supervisor powers hci3 off and on after the restart: serve registers its advertisement anew then, a second restored)
  wait_adv_instances 1 30 || fail "$SRV_ADAPTER's ActiveInstances $(adv_instances) after the restart, expected serve's 1"
  serve_json "
r = [l for l in lines if l.get('event') == 'restored']
check(r and all(l.get('detail') == 'registered again with bluetoothd' for l in r), 'restored events with failures: %r' % r)"
  bl read "$SRV" 2a38 --json "${DEV_OPTS[@]}"
  expect_rc 0
  expect_json "check(lines and lines[0].get('value') == '01', 'the body sensor location after the restart: %r' % lines)"
  bl disconnect "$SRV" "${DEV_OPTS[@]}"
  serve_stop INT
  [ "$SERVE_RC" = 130 ] || fail "serve exited $SERVE_RC on SIGINT, expected 130"
  reg_all_undone
}

# bluectl advertise with every field, seen whole by bluectl scan; an
# advertisement that does not fit is refused; nothing stays registered.
c_advertise_fields_seen_by_scan() {
  need_server
  local adv_out=$CHECK_DIR/$CHECK_NAME.adv.out pid a0
  a0=$(adv_instances)
  note "$SRV_ADAPTER ActiveInstances before: $a0"
  [ -n "$a0" ] || fail "cannot read $SRV_ADAPTER's LEAdvertisingManager1.ActiveInstances"
  reg_watch_start
  scan_start bluectl-adv
  echo "\$ bluectl advertise --adapter $SRV_ADAPTER --name bluectl-adv --service fff0 --manufacturer 0xffff=0102 --service-data fff1=0a0b --appearance 0x0341 --tx-power --json   (background)"
  env --default-signal=INT,TERM "$BLUECTL" advertise --adapter "$SRV_ADAPTER" --name bluectl-adv --service fff0 --manufacturer 0xffff=0102 \
    --service-data fff1=0a0b --appearance 0x0341 --tx-power --json --duration 300 > "$adv_out" 2> "$adv_out.err" < /dev/null &
  pid=$!; bg_track $pid
  wait_out "$adv_out" '"event": ?"advertising"' 60 $pid || { cat "$adv_out.err"; fail "advertise printed no advertising line"; }
  note "advertise: $(head -1 "$adv_out")"
  OUT=$adv_out
  expect_json "l = lines[0]; check(fields(l, event='advertising', adapter=SERVER), 'advertising line %r' % l)"
  [ "$(adv_instances)" = $((a0 + 1)) ] || fail "ActiveInstances $(adv_instances) while advertising, expected $((a0 + 1))"
  scan_wait
  expect_json "
d = one(lambda l: l.get('event') == 'discovered' and l.get('address') == SERVER_ADDR, 'discovered ' + SERVER_ADDR)
check(d.get('name') == 'bluectl-adv', 'name %r' % d.get('name'))
check(d.get('address_type') == 'public', 'address_type %r' % d.get('address_type'))
check(d.get('service_uuids') == [u16('fff0')], 'service_uuids %r' % d.get('service_uuids'))
check(d.get('manufacturer_data') == {'0xffff': '0102'}, 'manufacturer_data %r' % d.get('manufacturer_data'))
check(d.get('service_data') == {u16('fff1'): '0a0b'}, 'service_data %r' % d.get('service_data'))
check(d.get('appearance') == 0x0341, 'appearance %r, expected 833 (0x0341)' % d.get('appearance'))
check(isinstance(d.get('tx_power'), int), 'tx_power %r' % d.get('tx_power'))"
  kill -INT $pid; wait_exit $pid 20
  note "advertise exit $WRC; stderr: $(head -c 300 "$adv_out.err")"
  [ $WRC = 130 ] || fail "advertise exited $WRC on SIGINT, expected 130"
  wait_adv_instances "$a0" 10 || fail "ActiveInstances $(adv_instances) after advertise exited, expected $a0"
  reg_all_undone
  # --duration ends it by itself (exit 0), unregistered
  bl advertise --adapter "$SRV_ADAPTER" --name bluectl-dur --duration 3 --json
  expect_rc 0
  expect_json "check(lines and fields(lines[0], event='advertising', adapter=SERVER), 'advertising line %r' % lines[:1])"
  wait_adv_instances "$a0" 10 || fail "ActiveInstances $(adv_instances) after advertise --duration 3, expected $a0"
  # too long for the adapter (31 bytes: 3 flags + 4 + 27 bytes of manufacturer data): refused, nothing registered
  bl advertise --adapter "$SRV_ADAPTER" --manufacturer "0xffff=$(printf '%054d' 0)" --duration 5
  expect_rc 64
  [ "$(wc -l < "$ERR")" -ge 1 ] || fail "no message on stderr"
  grep -qiE 'too long|does not fit|exceed|[0-9]+ bytes' "$ERR" || fail "the refusal does not say it is too long: $(_first_err)"
  [ "$(adv_instances)" = "$a0" ] || fail "ActiveInstances $(adv_instances) after the refused advertisement, expected $a0"
}

# bthome_advertise_decoded: `bluectl advertise --bthome` on the server adapter, plain then
# encrypted (--bthome-key), its values changed on stdin; on the central, `bluectl scan
# --json --duplicates --sensors --keys` decodes every frame through bluetoothd 5.66, and a
# python3-dbus scanner of its own (Tests/Lab/bthome_ref.py) decodes the same ServiceData
# bytes with Home Assistant's bthome-ble (the repository's .venv): both agree, frame by frame.
c_bthome_advertise_decoded() {
  need_server
  local key=231d39c1d7cc1ab1aee224cd096db932 round adv_in=/tmp/$CHECK_NAME.adv.in
  local none=/tmp/$CHECK_NAME.none.json keys=/tmp/$CHECK_NAME.keys.json
  echo '{}' > "$none"; printf '{"%s": "%s"}\n' "$SRV" "$key" > "$keys"; chmod 600 "$none" "$keys"
  for round in plain encrypted; do
    local base=$CHECK_DIR/$CHECK_NAME.$round scan_keys=$none ref_key= adv_key=()
    [ $round = encrypted ] && { scan_keys=$keys; ref_key=$key; adv_key=(--bthome-key "$key"); }
    # hci1 forgets the last round's frame (a scan reports a cached device with it)
    bz remove "$SRV" || note "remove: $CENTRAL did not know $SRV"
    echo "\$ $PY Tests/Lab/bthome_ref.py $CENTRAL $SRV $ref_key   (background)"
    "$PY" "$REPO/Tests/Lab/bthome_ref.py" "$CENTRAL" "$SRV" $ref_key > "$base.ref" 2> "$base.ref.err" &
    local ref_pid=$!; bg_track $ref_pid
    wait_out "$base.ref" '^ready' 30 $ref_pid || { cat "$base.ref.err"; fail "the python3-dbus scanner did not start"; }
    echo "\$ bluectl scan --adapter $CENTRAL --json --duplicates --sensors --keys $scan_keys --timeout 150   (background)"
    timeout -k 5 170 "$BLUECTL" scan --adapter "$CENTRAL" --json --duplicates --sensors --keys "$scan_keys" --timeout 150 \
      > "$base.scan" 2> "$base.scan.err" < /dev/null &
    local scan_pid=$!; bg_track $scan_pid
    bz wait-adapter Discovering true 30 || fail "$CENTRAL not discovering for the scan"
    rm -f "$adv_in"; mkfifo "$adv_in"
    echo "\$ bluectl advertise --adapter $SRV_ADAPTER --bthome temperature=21.5 --bthome humidity=40 --bthome door=false ${adv_key[*]} --json   (background; stdin: a FIFO)"
    env --default-signal=INT,TERM "$BLUECTL" advertise --adapter "$SRV_ADAPTER" --bthome temperature=21.5 --bthome humidity=40 \
      --bthome door=false "${adv_key[@]}" --json --duration 300 < "$adv_in" > "$base.adv" 2> "$base.adv.err" &
    local adv_pid=$!; bg_track $adv_pid
    exec 7> "$adv_in"
    wait_out "$base.adv" '"event": ?"advertising"' 60 $adv_pid || { cat "$base.adv.err"; fail "advertise --bthome printed no advertising line"; }
    note "advertise: $(head -1 "$base.adv")"
    wait_out "$base.scan" '"temperature_c": ?21\.5' 60 $scan_pid || fail "$round: the scan did not decode temperature 21.5 from $SRV"
    echo '{"temperature": -7.25, "door": true}' >&7
    wait_out "$base.adv" '"event": ?"updated"' 20 $adv_pid || { cat "$base.adv.err"; fail "$round: advertise printed no updated line"; }
    wait_out "$base.scan" '"temperature_c": ?-7\.25' 60 $scan_pid || fail "$round: the scan did not see the frame changed on stdin"
    kill -INT $adv_pid; wait_exit $adv_pid 20; exec 7>&-
    note "advertise exit $WRC; stderr: $(head -c 300 "$base.adv.err")"
    [ $WRC = 130 ] || fail "$round: advertise exited $WRC on SIGINT, expected 130"
    kill -INT $scan_pid; wait_exit $scan_pid 20
    kill -TERM $ref_pid; wait_exit $ref_pid 20
    echo "# $round: bluectl scan's lines of $SRV"; grep -F "\"$SRV\"" "$base.scan" | head -c 4000; echo
    echo "# $round: the python3-dbus scanner"; cat "$base.ref"
    OUT=$base.scan
    expect_json "
s = [l['sensor'] for l in lines if l.get('address') == SERVER_ADDR and 'sensor' in l]
check(s, 'no sensor line of ' + SERVER_ADDR)
check(all(x['format'] == 'bthome' and x['encrypted'] == ('$round' == 'encrypted') for x in s), 'format/encrypted %r' % s[:2])
first = [x for x in s if x.get('temperature_c') == 21.5]
last = [x for x in s if x.get('temperature_c') == -7.25]
check(first and first[0].get('humidity_percent') == 40 and first[0].get('door') is False and first[0].get('packet_id') == 0, 'first frame %r' % first[:1])
check(last and last[-1].get('door') is True and last[-1].get('packet_id') == 1, 'changed frame %r' % last[-1:])
check('$round' == 'plain' or last[-1].get('counter') == first[0].get('counter') + 1, 'counters %r %r' % (first[:1], last[-1:]))
check(not [l for l in lines if l.get('address') == SERVER_ADDR and 'sensor_error' in l], 'a sensor_error')"
    "$PY" "$REPO/Tests/Lab/bthome_ref.py" compare "$base.scan" "$base.ref" "$SRV" > "$base.compare" 2>&1
    local crc=$?
    cat "$base.compare"
    [ $crc = 0 ] || fail "$round: bluectl and bthome-ble disagree, or bthome-ble did not see a frame (above)"
  done
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
run subscribe_two_bluectl c_subscribe_two_bluectl
run subscribe_beside_python c_subscribe_beside_python
run subscribe_read_by_other c_subscribe_read_by_other
run soak_stream_100k c_soak_stream_100k
run extra_stream_acquire c_extra_stream_acquire
run extra_subscribe_reconnect c_extra_subscribe_reconnect
run extra_pair_on_demand c_extra_pair_on_demand
# ---- the second peripheral (static random address), the lifecycle, two
# devices at once, and faults injected into the stack (last: they power a
# peripheral off and kill bluetoothd)
run periph2_scan_random c_periph2_scan_random
run periph2_read_long c_periph2_read_long
run periph2_stream c_periph2_stream
run devices_pair_trust_unpair c_devices_pair_trust_unpair
run two_devices_stream c_two_devices_stream
run two_devices_power_cycle c_two_devices_power_cycle
run two_devices_bluetoothd_segv c_two_devices_bluetoothd_segv
# ---- the peripheral role: bluectl serve/advertise on $SERVER (hci3), centrals on hci1
run serve_heart_rate_example_client c_serve_heart_rate_example_client
run serve_vs_bluectl_central c_serve_vs_bluectl_central
run advertise_fields_seen_by_scan c_advertise_fields_seen_by_scan
run bthome_advertise_decoded c_bthome_advertise_decoded
run serve_bluetoothd_segv c_serve_bluetoothd_segv
tally
