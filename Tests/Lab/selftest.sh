#!/bin/bash
# Proves the lab itself, independently of bluectl: BlueZ's own tools
# (dbus-send, btmgmt, bluetoothctl) check the set-up, then the whole lab tier
# (run-checks.sh) runs with BLUECTL=refctl.py, a python3-dbus stand-in that
# implements bluectl's CLI contract -- so every check is shown to pass against
# a correct implementation. `Scripts/lab selftest` runs this.
# Output: PASS/FAIL lines, then exactly one line "N passed, M failed".
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=Tests/Lab/lib.sh
. "$HERE/lib.sh"
BZ=("$PY" -I "$HERE/bluez.py")

prop() { # PATH IFACE PROP -> last word of dbus-send's literal reply
  dbus-send --system --print-reply=literal --dest=org.bluez "$1" org.freedesktop.DBus.Properties.Get \
    "string:$2" "string:$3" | awk '{ print $NF }'
}

s_adapters() {
  local hci want
  for hci in hci0 hci1; do
    [ $hci = hci0 ] && want=$PERIPH_ADDR || want=$CENTRAL_ADDR
    [ "$(prop /org/bluez/$hci org.bluez.Adapter1 Address)" = "$want" ] || fail "$hci address is not $want"
    [ "$(prop /org/bluez/$hci org.bluez.Adapter1 Powered)" = true ] || fail "$hci not powered"
  done
}
s_peripheral_le_only() {
  # btmgmt quits at EOF on stdin before the reply arrives: keep its stdin open
  local s; s=$(timeout 20 btmgmt --index 0 info < <(sleep 15) | sed -n 's/.*current settings: //p')
  note "hci0 settings: $s"
  [[ " $s " == *" le "* ]] || fail "LE off on hci0: $s"
  [[ " $s " != *" br/edr "* ]] || fail "BR/EDR still on on hci0: $s"
  [[ " $s " == *" discoverable "* ]] || fail "hci0 not discoverable: $s"
}
s_second_peripheral() {
  # hci2: LE-only, its LE identity the static random address the guest reports
  [ "$PERIPH2_ADDR_TYPE" = random ] || fail "PERIPH2_ADDR_TYPE=$PERIPH2_ADDR_TYPE"
  [ "$(adapter_identity "$PERIPHERAL2")" = "$PERIPH2_ADDR random" ] || fail "$PERIPHERAL2's identity is $(adapter_identity "$PERIPHERAL2"), not $PERIPH2_ADDR random"
  local s; s=$(timeout 20 btmgmt --index 2 info < <(sleep 15) | sed -n 's/.*current settings: //p')
  note "hci2 settings: $s"
  [[ " $s " == *" static-addr "* && " $s " != *" br/edr "* && " $s " == *" powered "* ]] || fail "hci2 settings: $s"
  local n; n=$(prop /org/bluez/hci2 org.bluez.LEAdvertisingManager1 ActiveInstances)
  [[ $n =~ ^[1-3]$ ]] || fail "hci2 ActiveInstances=$n, expected 1 to 3"
}
s_advertising() {
  local n; n=$(prop /org/bluez/hci0 org.bluez.LEAdvertisingManager1 ActiveInstances)
  # the example advertisement, plus one or two pulse copies (they take turns)
  [[ $n =~ ^[1-3]$ ]] || fail "hci0 ActiveInstances=$n, expected 1 to 3"
}
s_bluetoothctl_show() {
  local o; o=$(timeout 20 bluetoothctl show "$CENTRAL_ADDR" 2>&1); echo "$o"
  grep -q "Powered: yes" <<<"$o" || fail "bluetoothctl show $CENTRAL_ADDR: not 'Powered: yes'"
}
s_bluetoothd_version() {
  local v; v=$(/usr/libexec/bluetooth/bluetoothd --version); note "bluetoothd $v"
  [ -n "$v" ] || fail "no bluetoothd version"
}

check lab_adapters s_adapters
check lab_peripheral_le_only s_peripheral_le_only
check lab_advertising s_advertising
check lab_second_peripheral s_second_peripheral
check lab_bluetoothctl_show s_bluetoothctl_show
check lab_bluetoothd_version s_bluetoothd_version

if [ "${SELFTEST_TIER:-1}" = 1 ]; then
  # the tier against the reference implementation; its own summary line is
  # replaced by ours (import_results prefixes everything else)
  mkdir -p "$LAB_OUT/refctl"
  LAB_OUT=$LAB_OUT/refctl BLUECTL=$HERE/refctl.py bash "$HERE/run-checks.sh" "$@" > "$LAB_OUT/refctl/tier.log" 2>&1
  grep -vE '^[0-9]+ passed, [0-9]+ failed$' "$LAB_OUT/refctl/tier.log" > "$LAB_OUT/refctl/tier-lines.log"
  import_results "refctl:" "$LAB_OUT/refctl/tier-lines.log"
fi
summary
