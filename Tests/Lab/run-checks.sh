#!/bin/bash
# The lab test tier: bluectl against the real BlueZ stack in the lab VM.
# Run it with `Scripts/lab test` (one boot runs every check). Each check runs
# bluectl, captures its real stdout/stderr/exit status and asserts on them
# (and, where it matters, on what bluetoothd says happened: Tests/Lab/bluez.py).
#
# Env (from Scripts/lab): BLUECTL CENTRAL CENTRAL_ADDR PERIPH_ADDR LAB_OUT REPO
# PERIPHERAL2 PERIPH2_ADDR PERIPH2_ADDR_TYPE [LAB_GATT_CHANNELS]. Usage:
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
TIER_CHECKS=38
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
tally
