# Tiny check framework for the lab tier (bash; sourced by scripts that run in
# the lab guest). A check is a shell function run in a subshell:
#
#   check NAME FUNCTION [ARGS...]
#
# It passes when FUNCTION returns 0, fails on `fail "why"` or any non-zero
# status, and is skipped on `skip "why"`. Output: `PASS NAME`,
# `FAIL NAME: why` (followed by indented context), `SKIP NAME: why`;
# `summary` prints exactly one line `N passed, M failed, K skipped` and
# returns non-zero when anything failed or was skipped: a check that did not
# run proves nothing, so a skip fails the tier too (LAB_ALLOW_SKIPS=1, for a
# developer's exploratory run, makes skips non-fatal; CI never sets it).
#
# Known flake, retried once: a check that fails while bluetoothd's log shows
# the emulated link's ATT stall (KNOWN_STALL below) is run once more, and the
# report says so (`RETRIED NAME: ...`, then its second result). Any other
# failure is final.
#
# Inside a check:
#   bl ARGS...          run $BLUECTL ARGS (stdin /dev/null, killed after $BL_TIMEOUT s);
#                       sets RC, OUT (stdout file), ERR (stderr file), SECS
#   expect_rc N [N...]  the last bl exited with one of these statuses
#   expect_json CODE    python over the last bl's stdout: `lines` (parsed JSON
#                       lines), `text`, `env`; check(cond, msg); see jcheck.py
#   expect_out TEXT / expect_no_out TEXT   (fixed string, case-insensitive)
#   note TEXT           a line in the check's log ($LAB_OUT/checks/NAME.log)
# Every bl call is logged with its real stdout, stderr and exit status in
# $LAB_OUT/checks/NAME.log.

LAB_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3
BL_TIMEOUT=${BL_TIMEOUT:-60}
CHECK_DIR=${LAB_OUT:-/tmp}/checks
mkdir -p "$CHECK_DIR"
_PASSED=0 _FAILED=0 _SKIPPED=0 _SKIPS=() _RETRIED=()
# The one flake retried: bluetoothd's ATT transaction timeout (src/shared/att.c
# timeout_cb, logged through src/device.c gatt_debug with -d): the emulated
# link under TCG sometimes loses an ATT response and bluetoothd gives up on the
# request after 30 s (Tests/Lab/README.md, "The one retry").
KNOWN_STALL='gatt_debug\(\) \(chan 0x[0-9a-f]+\) Operation timed out: 0x[0-9a-f]{2}'
BTD_LOG=${LAB_OUT:-/tmp}/bluetoothd.log
# bluetoothd's deaths, one line each, from the guest's supervisor (main.sh)
SUPERVISOR_LOG=${LAB_OUT:-/tmp}/supervisor.log
_CRASHES=0
# bluetoothd's deaths after line $1 of supervisor.log, less those a check
# caused on purpose (bluetoothd_segv writes a "deliberate:" line first)
crashes_since() {
  local all mine
  all=$(tail -n +"$(($1 + 1))" "$SUPERVISOR_LOG" 2>/dev/null | grep -c "bluetoothd .*restarting")
  mine=$(tail -n +"$(($1 + 1))" "$SUPERVISOR_LOG" 2>/dev/null | grep -c " deliberate: ")
  echo $((all - mine))
}
_sup_lines() { cat "$SUPERVISOR_LOG" 2>/dev/null | wc -l; }
_now() { date +%s.%N; }
_dt() { awk -v a="$1" -v b="$(_now)" 'BEGIN { printf "%.1f", b - a }'; }

# Killed by the lab's time limit (SIGTERM from `timeout`): the check that was
# running fails, and the summary line is still printed.
_CURRENT=
_on_term() {
  trap - TERM INT
  if [ -n "$_CURRENT" ]; then
    echo "FAIL $_CURRENT: interrupted (the lab's time limit ran out)"; _FAILED=$((_FAILED + 1))
  fi
  summary
  exit 124
}
trap _on_term TERM INT

_btd_lines() { cat "$BTD_LOG" 2>/dev/null | wc -l; }
# The known stall in bluetoothd's log after line $1, if any (the matching line).
stall_since() { tail -n +"$(($1 + 1))" "$BTD_LOG" 2>/dev/null | grep -m1 -E "$KNOWN_STALL"; }

_run_check() { # NAME FUNCTION [ARGS...] -> rc; logs in $CHECK_DIR/NAME.log
  local name=$1; shift
  rm -f "$CHECK_DIR/$name".*
  (
    CHECK_NAME=$name; _BL_N=0
    set -o pipefail
    "$@"
  ) > "$CHECK_DIR/$name.log" 2>&1 < /dev/null
}

check() {
  local name=$1; shift
  local log=$CHECK_DIR/$name.log t0 rc why btd0 sup0 stall n
  _CURRENT=$name
  _RAN=$((${_RAN:-0} + 1))
  t0=$(_now)
  btd0=$(_btd_lines)
  sup0=$(_sup_lines)
  _run_check "$name" "$@"
  rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && stall=$(stall_since "$btd0"); then
    why=$(cat "$CHECK_DIR/$name.why" 2>/dev/null || echo "status $rc")
    echo "RETRIED $name: the known ATT stall during the check ($stall); first failure: $why"
    _RETRIED+=("$name")
    mkdir -p "$CHECK_DIR/first-attempt"
    for f in "$CHECK_DIR/$name".*; do [ -e "$f" ] && mv "$f" "$CHECK_DIR/first-attempt/"; done
    _run_check "$name" "$@"
    rc=$?
  fi
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(_dt "$t0")" >> "$CHECK_DIR/times.tsv"
  n=$(crashes_since "$sup0")
  if [ "$n" -gt 0 ]; then
    echo "CRASH during $name: bluetoothd died $n time(s) and was restarted: $(tail -n +"$((sup0 + 1))" "$SUPERVISOR_LOG" | tr '\n' ';')"
    _CRASHES=$((_CRASHES + n))
  fi
  why=$(cat "$CHECK_DIR/$name.why" 2>/dev/null || true)
  case $rc in
    0) echo "PASS $name"; _PASSED=$((_PASSED + 1));;
    77) echo "SKIP $name: ${why:-skipped}"; _SKIPPED=$((_SKIPPED + 1)); _SKIPS+=("$name");;
    *) echo "FAIL $name: ${why:-check exited with status $rc}"; _FAILED=$((_FAILED + 1))
       tail -n "${CONTEXT_LINES:-12}" "$log" | sed 's/^/    | /';;
  esac
  _CURRENT=
}

fail() { echo "FAIL: $*"; echo "$*" > "$CHECK_DIR/$CHECK_NAME.why"; exit 1; }
skip() { echo "SKIP: $*"; echo "$*" > "$CHECK_DIR/$CHECK_NAME.why"; exit 77; }
note() { echo "# $*"; }

# Count PASS/FAIL/SKIP lines of another runner (a nested tier, a python
# flow) as our own; its lines are shown with a prefix so that only our
# summary line starts a line with a count.
import_results() { # PREFIX FILE
  local prefix=$1 file=$2 line
  while IFS= read -r line; do
    case $line in
      "PASS "*) _PASSED=$((_PASSED + 1)); echo "PASS $prefix${line#PASS }";;
      "FAIL "*) _FAILED=$((_FAILED + 1)); echo "FAIL $prefix${line#FAIL }";;
      "SKIP "*) _SKIPPED=$((_SKIPPED + 1)); _SKIPS+=("$prefix${line#SKIP }"); echo "SKIP $prefix${line#SKIP }";;
      *) echo "    | $line";;
    esac
  done < "$file"
}

summary() {
  if [ "$_SKIPPED" -gt 0 ]; then
    echo "skipped $_SKIPPED: ${_SKIPS[*]%%:*}$([ "${LAB_ALLOW_SKIPS:-0}" = 1 ] && echo " (allowed: LAB_ALLOW_SKIPS=1)" || echo " (a skip fails the tier)")"
  fi
  [ ${#_RETRIED[@]} -gt 0 ] && echo "retried after the known ATT stall: ${_RETRIED[*]}"
  [ "$_CRASHES" -gt 0 ] && echo "bluetoothd died $_CRASHES time(s) during the checks (restarted by the supervisor; see CRASH lines)"
  echo "$_PASSED passed, $_FAILED failed, $_SKIPPED skipped"
  [ "$_FAILED" -eq 0 ] || return 1
  [ "$_SKIPPED" -eq 0 ] || [ "${LAB_ALLOW_SKIPS:-0}" = 1 ]
}

bl() {
  _BL_N=$((_BL_N + 1))
  OUT=$CHECK_DIR/$CHECK_NAME.$_BL_N.out
  ERR=$CHECK_DIR/$CHECK_NAME.$_BL_N.err
  local t0; t0=$(_now)
  echo "\$ bluectl $*"
  echo "# started $(date +%T.%3N) (compare btmon.log)"
  timeout -k 5 "$BL_TIMEOUT" "$BLUECTL" "$@" > "$OUT" 2> "$ERR" < /dev/null
  RC=$?
  SECS=$(_dt "$t0")
  echo "# exit $RC after ${SECS}s"
  [ -s "$OUT" ] && { echo "# stdout:"; head -c 20000 "$OUT"; echo; }
  [ -s "$ERR" ] && { echo "# stderr:"; head -c 4000 "$ERR"; echo; }
  if [ "$RC" = 124 ] && awk -v s="$SECS" -v l="$BL_TIMEOUT" 'BEGIN { exit !(s >= l - 0.5) }'; then
    echo "# killed: no exit within ${BL_TIMEOUT}s"
    KILLED=1
  else
    KILLED=0
  fi
  return 0
}

_first_err() { head -c 300 "$ERR" 2>/dev/null | tr '\n' ' '; }

expect_rc() {
  local want
  [ "${KILLED:-0}" = 1 ] && fail "bluectl $* did not finish within ${BL_TIMEOUT}s (killed)"
  for want in "$@"; do [ "$RC" = "$want" ] && return 0; done
  fail "exit status $RC, expected $*${ERR:+; stderr: $(_first_err)}"
}

expect_json() {
  local msg
  if ! msg=$("$PY" -I "$LAB_LIB_DIR/jcheck.py" "$OUT" "$1" 2>&1); then
    fail "${msg:-JSON check failed}"
  fi
  [ -n "$msg" ] && echo "$msg"
  return 0
}

expect_out() { grep -qiF -- "$1" "$OUT" || fail "stdout lacks '$1'"; }
expect_no_out() { ! grep -qiF -- "$1" "$OUT" || fail "stdout has '$1'"; }

# bl_signal INT|TERM DELAY ARGS...: run bluectl ARGS, send it SIGINT/SIGTERM
# after DELAY s; RC is the status a shell would see (130/143 when the signal
# killed it or it exited with that code); 124 when it ignored the signal for 15 s.
bl_signal() {
  local sig=$1 delay=$2; shift 2
  _BL_N=$((_BL_N + 1))
  OUT=$CHECK_DIR/$CHECK_NAME.$_BL_N.out
  ERR=$CHECK_DIR/$CHECK_NAME.$_BL_N.err
  echo "\$ bluectl $*   (SIG$sig after ${delay}s)"
  "$PY" -I "$LAB_LIB_DIR/sigrun.py" "$sig" "$delay" 15 "$OUT" "$ERR" "$BLUECTL" "$@"
  RC=$?; KILLED=0
  echo "# exit $RC"
  [ -s "$OUT" ] && { echo "# stdout:"; head -c 4000 "$OUT"; echo; }
  [ -s "$ERR" ] && { echo "# stderr:"; head -c 4000 "$ERR"; echo; }
  return 0
}

# bz: what bluetoothd says (Tests/Lab/bluez.py), with the frequent property
# waits done by dbus-send (a python start costs seconds on a busy TCG guest):
#   bz wait ADDR PROP true|false SECS       Device1.PROP of ADDR on $CENTRAL
#   bz wait-adapter PROP true|false SECS    Adapter1.PROP of $CENTRAL
#   bz device|wait-notifying|remove|adapter ...   -> bluez.py
_bz_prop() { # PATH IFACE PROP -> value (last word of dbus-send's literal reply)
  dbus-send --system --print-reply=literal --dest=org.bluez "$1" org.freedesktop.DBus.Properties.Get \
    "string:$2" "string:$3" 2>/dev/null | awk '{ print $NF }'
}
_bz_wait() { # PATH IFACE PROP VALUE SECS
  local end=$((SECONDS + ${5%.*})) v
  while :; do
    v=$(_bz_prop "$1" "$2" "$3")
    [ "$v" = "$4" ] && return 0
    [ $SECONDS -ge $end ] && break
    sleep 0.2
  done
  echo "timeout: $1 $3=${v:-?}, wanted $4 within $5 s" >&2
  return 1
}
bz() {
  case $1 in
    wait) _bz_wait "/org/bluez/$CENTRAL/dev_${2//:/_}" org.bluez.Device1 "$3" "$4" "$5";;
    wait-adapter) _bz_wait "/org/bluez/$CENTRAL" org.bluez.Adapter1 "$2" "$3" "$4";;
    *) "$PY" -I "$LAB_LIB_DIR/bluez.py" "$@";;
  esac
}

# ---------------------------------------------------------------------------
# The lab's adapters, bluetoothd and its storage (for checks on either
# peripheral: hci0 = $PERIPHERAL, hci2 = $PERIPHERAL2).

# adapter_power hciN on|off: Adapter1.Powered through bluetoothd, then wait
# (20 s) until it reads back. Powering a peripheral's adapter off drops its
# links: the central sees the device disconnect.
adapter_power() {
  local v
  case $2 in on) v=true;; off) v=false;; *) echo "adapter_power: on or off, not '$2'"; return 2;; esac
  note "$1 powered $2"
  dbus-send --system --print-reply --dest=org.bluez "/org/bluez/$1" org.freedesktop.DBus.Properties.Set \
    string:org.bluez.Adapter1 string:Powered "variant:boolean:$v" > /dev/null || { echo "cannot power $1 $2"; return 1; }
  _bz_wait "/org/bluez/$1" org.bluez.Adapter1 Powered "$v" 20
}
# power_cycle hciN [OFF_SECS]: off, OFF_SECS (default 2) seconds, on.
power_cycle() { adapter_power "$1" off && sleep "${2:-2}" && adapter_power "$1" on; }

# adapter_identity hciN -> "ADDR public|random": the kernel's LE identity
# (debugfs). For hci2 it is the static random address, while bluetoothd's
# Adapter1.Address still shows the controller's public one.
adapter_identity() {
  local a t
  read -r a t < <(sed -n 's/^\([0-9a-f:]\{17\}\) (type \([01]\)).*/\1 \2/p' "/sys/kernel/debug/bluetooth/$1/identity" 2>/dev/null)
  [ -n "$a" ] || return 1
  echo "${a^^} $([ "$t" = 1 ] && echo random || echo public)"
}

# bluetoothd_segv [SECS]: SIGSEGV to bluetoothd, as its own 5.66 crashes do;
# then wait (default 150 s) until the guest's supervisor has restarted it and
# brought both peripherals (hci0, hci2) up again: its "peripheral ready again"
# line in supervisor.log after the death's line. A "deliberate:" line goes to
# supervisor.log first, so the kill is not counted as a crash (crashes_since).
bluetoothd_segv() {
  local n0 pid end
  n0=$(_sup_lines)
  pid=$(pidof bluetoothd) || { echo "bluetoothd is not running"; return 1; }
  echo "$(cut -d' ' -f1 /proc/uptime) deliberate: check ${CHECK_NAME:-?} sends SIGSEGV to bluetoothd ($pid)" >> "$SUPERVISOR_LOG"
  note "kill -SEGV $pid (bluetoothd)"
  kill -SEGV "$pid" || return 1
  end=$((SECONDS + ${1:-150}))
  until tail -n +"$((n0 + 1))" "$SUPERVISOR_LOG" | grep -q "killed by signal 11"; do
    [ $SECONDS -lt $end ] || { echo "bluetoothd did not die of SIGSEGV"; return 1; }
    sleep 0.2
  done
  until tail -n +"$((n0 + 1))" "$SUPERVISOR_LOG" | grep -q "peripheral ready again"; do
    [ $SECONDS -lt $end ] || { echo "the supervisor did not bring the peripherals up again: $(tail -n +"$((n0 + 1))" "$SUPERVISOR_LOG" | tr '\n' ';')"; return 1; }
    sleep 0.5
  done
  note "supervisor: $(tail -n +"$((n0 + 1))" "$SUPERVISOR_LOG" | tr '\n' ';')"
}

# bluetoothd's storage of a device: /var/lib/bluetooth/ADAPTER_ADDR/DEVICE_ADDR/info
# and the GATT cache /var/lib/bluetooth/ADAPTER_ADDR/cache/DEVICE_ADDR.
# ADAPTER_ADDR is the adapter's address as bluetoothd knows it (the central:
# $CENTRAL_ADDR). An LE bond's key is [LongTermKey] (ours, for when we are
# central: legacy pairing) and/or [PeripheralLongTermKey] (= the deprecated
# [SlaveLongTermKey], both written by 5.66); a central that paired with LE
# Secure Connections stores only the latter (seen in the lab); BR/EDR: [LinkKey].
has_bond() { # ADAPTER_ADDR DEVICE_ADDR
  grep -qE '^\[(LongTermKey|PeripheralLongTermKey|SlaveLongTermKey|LinkKey)\]' "/var/lib/bluetooth/$1/$2/info" 2>/dev/null
}
# The cache file outlives RemoveDevice: bluetoothd 5.66 (src/device.c
# device_remove_stored) removes its [Attributes] and [ServiceRecords] groups
# and keeps the rest ([General] Name=...). So "a GATT cache" = [Attributes].
has_gatt_cache() { # ADAPTER_ADDR DEVICE_ADDR
  grep -q '^\[Attributes\]' "/var/lib/bluetooth/$1/cache/$2" 2>/dev/null
}
storage_note() { # ADAPTER_ADDR DEVICE_ADDR: what bluetoothd stores of the device, as a note
  local d=/var/lib/bluetooth/$1/$2
  note "storage of $2 on $1: info $( [ -f "$d/info" ] && grep -oE '^\[[A-Za-z]+\]' "$d/info" | tr -d '\n' || echo absent);" \
    "cache $( [ -f "/var/lib/bluetooth/$1/cache/$2" ] && grep -oE '^\[[A-Za-z]+\]' "/var/lib/bluetooth/$1/cache/$2" | tr -d '\n' || echo absent)"
}
