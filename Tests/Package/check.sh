#!/usr/bin/env bash
# Installs the packages Scripts/package built (bluectl and bluectl-doc) with
# `dpkg -i` into a throwaway
# root (its own dpkg database, dependencies not checked: that root has no
# other packages; the host has them), then checks what a user gets:
#   the installed bluectl runs (--version is the package's version, help works),
#   and is not 40 MB larger for Foundation's ICU data;
#   man shows bluectl(1) and a subcommand's page, with the exit codes (its
#   EXIT STATUS lists bluectl's), the examples and the JSON fields; every
#   page renders without a groff warning in the C and UTF-8 locales, with no
#   raw markdown, no dropped text, and every doc it names installed; help and
#   remove have pages of their own; the Description says central and
#   peripheral; BluectlCore's DocC reference is installed (by bluectl-doc,
#   which bluectl suggests);
#   the completion scripts parse (bash -n, zsh -n, fish -n: Scripts/deps
#   installs zsh and fish, and a missing one fails);
#   each systemd unit (subscribe, gateway, proxy) runs /usr/bin/bluectl, and
#   systemd-analyze accepts it;
#   dpkg -r removes every file they installed;
#   Scripts/install --prefix DIR installs the same binary and pages into a
#   temporary prefix (without the packaging tools), and refuses a missing DIR.
# usage: Tests/Package/check.sh [DEB [DOC_DEB]]   (default: the ones in .build-package/)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
deb=${1:-$(ls "$REPO"/.build-package/bluectl_*.deb 2>/dev/null | head -1)}
docdeb=${2:-$(ls "$REPO"/.build-package/bluectl-doc_*.deb 2>/dev/null | head -1)}
[ -f "$deb" ] && [ -f "$docdeb" ] || { echo "FAIL: no packages (run Scripts/package first)"; exit 1; }
root=$(mktemp -d /tmp/bluectl-pkgroot.XXXXXX)
trap 'rm -rf "$root"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
pass() { echo "PASS: $*"; }

mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --log=/dev/null --force-depends --force-script-chrootless -i "$deb" "$docdeb" > "$root.install.log" 2>&1 \
  || { cat "$root.install.log"; fail "dpkg -i"; exit 1; }
for package in bluectl bluectl-doc; do
  status=$(dpkg --root="$root" -s $package | sed -n 's/^Status: //p')
  [ "$status" = "install ok installed" ] && pass "dpkg -i $package: $status" || fail "dpkg status of $package '$status'"
done

bin=$root/usr/bin/bluectl
version=$(dpkg-deb -f "$deb" Version)
# the Swift runtime is linked in, Foundation's ICU data is not (it would be
# 40 MB more: FoundationEssentials, not Foundation, in the sources). 30,756 KB
# at the sensors' merge with the DocC reference (6.3 MB then, 14.2 MB at
# 1,039 public symbols: 1,100 folders of a page each); since that moved to
# bluectl-doc, bluectl is the binary (21.0 MB at 5d52ce5, the proxy and the
# gateway in it) and 0.7 MB of docs, man pages and completions: the limit
# leaves room to grow and still catches ICU.
size=$(dpkg-deb -f "$deb" Installed-Size)
[ "$size" -lt 30000 ] && pass "installed size $size KB" || fail "installed size $size KB (does a source import Foundation instead of FoundationEssentials?)"
[ "$(dpkg-deb -f "$docdeb" Version)" = "$version" ] && dpkg-deb -f "$deb" Suggests | grep -qx "bluectl-doc" \
  && pass "bluectl suggests bluectl-doc $version ($(dpkg-deb -f "$docdeb" Installed-Size) KB installed)" \
  || fail "bluectl-doc: version $(dpkg-deb -f "$docdeb" Version), bluectl's Suggests '$(dpkg-deb -f "$deb" Suggests)'"
[ "$("$bin" --version)" = "$version" ] && pass "bluectl --version = $version" || fail "bluectl --version printed '$("$bin" --version 2>&1)', expected $version"
"$bin" help read | grep -q "USAGE: bluectl read" && pass "bluectl help read" || fail "bluectl help read"

man_page() { MANWIDTH=100 man -l "$1" 2>/dev/null | col -b; }
page=$(man_page "$root/usr/share/man/man1/bluectl.1.gz")
grep -q "^NAME" <<< "$page" && grep -q "Exit codes:" <<< "$page" && grep -q "bluectl-read(1)" <<< "$page" \
  && pass "man bluectl: NAME, exit codes, SEE ALSO bluectl-read(1)" || fail "man bluectl: $(head -5 <<< "$page")"
page=$(man_page "$root/usr/share/man/man1/bluectl-read.1.gz")
grep -q "bluectl-read" <<< "$page" && grep -q "bluectl read \[--adapter" <<< "$page" \
  && pass "man bluectl-read: its name and synopsis" || fail "man bluectl-read: $(head -8 <<< "$page")"
grep -q "^JSON OUTPUT" <<< "$page" && grep -q "^ *bluectl read AA:BB:CC:DD:EE:FF battery_level$" <<< "$page" \
  && pass "man bluectl-read: its examples and where the JSON fields are" || fail "man bluectl-read: no examples or JSON OUTPUT"
exits=$(sed -n '/^EXIT STATUS/,/^[A-Z]/p' <<< "$page")
grep -q "141[[:space:]]*stdout's reader went away" <<< "$exits" && grep -q "^[[:space:]]*64[[:space:]]*bad usage" <<< "$exits" && ! grep -q "exits 0 on success" <<< "$exits" \
  && pass "man bluectl-read: EXIT STATUS lists bluectl's exit codes (141 included)" || fail "man bluectl-read: EXIT STATUS: $exits"
page=$(man_page "$root/usr/share/man/man1/bluectl.1.gz")
json=$(sed -n '/^JSON OUTPUT/,/^EXIT STATUS/p' <<< "$page"); missing=
for field in manufacturer_data ibeacon was_connected gatt_services; do grep -qw "$field" <<< "$json" || missing+=" $field"; done
[ -z "$missing" ] && pass "man bluectl: JSON OUTPUT (from docs/output.md) names scan, beacon and device-command fields" \
  || fail "man bluectl: JSON OUTPUT lacks$missing"
subs=$("$bin" --help | sed -n '/^SUBCOMMANDS:/,/^$/p' | grep -E '^  [a-z]' | awk '{ sub(/,$/, "", $1); print $1 }' | sort)   # "unpair, remove": the name, not its aliases
pages=$(cd "$root/usr/share/man/man1" && ls bluectl-*.1.gz | sed 's/^bluectl-//; s/\.1\.gz$//' | sort)
[ "$pages" = "$(printf '%s\n' $subs help | sort)" ] \
  && pass "man pages: bluectl(1) and one per subcommand ($(echo $pages | wc -w))" || fail "man pages '$(echo $pages)' for subcommands '$(echo $subs)'"

# every page, as a user meets it (man -l, in the C locale as in UTF-8): no groff
# warning, nothing of the markdown left raw, no character the generator dropped,
# and every doc a page names is installed
docs_named=
for gz in "$root"/usr/share/man/man1/*.1.gz; do
  name=$(basename "$gz" .1.gz)
  for loc in C C.UTF-8; do
    warnings=$(LC_ALL=$loc MANWIDTH=100 man --warnings -l "$gz" 2>&1 > /dev/null || true)
    [ -z "$warnings" ] || fail "man -l $name ($loc): $warnings"
  done
  text=$(LC_ALL=C man_page "$gz")
  grep -q '^ *#' <<< "$text" && fail "$name: a raw markdown heading: $(grep -m1 '^ *#' <<< "$text")"
  grep -q 'docs/[a-z-]*\.md' <<< "$text" && fail "$name: names the source tree's $(grep -o -m1 'docs/[a-z-]*\.md' <<< "$text"), which is not installed"
  [ "$(wc -l <<< "$text")" -gt 12 ] || fail "$name: nearly empty ($(wc -l <<< "$text") lines)"
  docs_named+=" $(grep -o '/usr/share/doc/bluectl/[a-z-]*\.md' <<< "$text" | tr '\n' ' ' || true)"
done
missing=; for d in $(tr ' ' '\n' <<< "$docs_named" | sort -u); do [ -f "$root$d" ] || missing+=" $d"; done
[ -z "$missing" ] && [ -n "$(echo $docs_named)" ] && pass "man pages: every doc they name is installed ($(tr ' ' '\n' <<< "$docs_named" | sort -u | grep -c .))" \
  || fail "man pages name docs the package does not install:$missing"
page=$(LC_ALL=C man_page "$root/usr/share/man/man1/bluectl-scan.1.gz")
grep -q "in dBm (-127 to 20)" <<< "$page" && pass "man bluectl-scan: --rssi's range whole (-127 to 20)" || fail "man bluectl-scan: $(grep -m1 'in dBm' <<< "$page")"
page=$(LC_ALL=C man_page "$root/usr/share/man/man1/bluectl-serve.1.gz")
page=$(tr '\n' ' ' <<< "$page" | tr -s ' ')   # one line: man breaks (and hyphenates) where it likes
grep -q "indicate, encrypt-\{0,1\} \{0,1\}read and the others BlueZ lists. A bad SPEC" <<< "$page" && ! grep -q "encrypt-read, \." <<< "$page" \
  && pass "man bluectl-serve: its flags sentence whole" || fail "man bluectl-serve: $(grep -m1 'encrypt-read' <<< "$page")"
page=$(LC_ALL=C man_page "$root/usr/share/man/man1/bluectl.1.gz")
grep -q "^ *Several devices" <<< "$page" && ! grep -q "###" <<< "$page" && pass "man bluectl: JSON OUTPUT's subsections are headings" \
  || fail "man bluectl: $(grep -m1 'Several devices' <<< "$page")"
page=$(LC_ALL=C man_page "$root/usr/share/man/man1/bluectl-help.1.gz")
grep -q "Prints the help of a subcommand" <<< "$page" && pass "man bluectl-help: says what it does" || fail "man bluectl-help: $page"
page=$(LC_ALL=C man_page "$root/usr/share/man/man1/bluectl-remove.1.gz")
grep -q "bluectl remove \[--adapter" <<< "$page" && pass "man bluectl-remove: its synopsis" || fail "man bluectl-remove: $(head -8 <<< "$page")"
# (read whole first: `dpkg-deb | grep -q` under pipefail fails when grep leaves before dpkg-deb has written all)
description=$(dpkg-deb -f "$deb" Description)
grep -q "central and peripheral" <<< "$description" && pass "Description: central and peripheral" \
  || fail "Description: $(head -1 <<< "$description")"
ref=$root/usr/share/doc/bluectl-doc/reference
[ -f "$ref/index.html" ] && [ -f "$ref/data/documentation/bluectlcore.json" ] \
  && pass "DocC reference of BluectlCore installed ($(du -sk "$ref" | cut -f1) KB)" || fail "no DocC reference under $ref"

bash -n "$root/usr/share/bash-completion/completions/bluectl" && pass "bash completion parses" || fail "bash -n"
# shellcheck disable=SC1091
(source "$root/usr/share/bash-completion/completions/bluectl" && complete -p bluectl > /dev/null) \
  && pass "bash completion registers for bluectl" || fail "bash completion does not register"
# Scripts/deps installs zsh and fish: without one, its check would not run
if ! command -v zsh > /dev/null; then fail "no zsh to check the zsh completion (Scripts/deps installs it)"
elif zsh -n "$root/usr/share/zsh/vendor-completions/_bluectl"; then pass "zsh completion parses"; else fail "zsh -n"; fi
if ! command -v fish > /dev/null; then fail "no fish to check the fish completion (Scripts/deps installs it)"
elif fish -n "$root/usr/share/fish/vendor_completions.d/bluectl.fish"; then pass "fish completion parses"; else fail "fish -n"; fi

for command in subscribe gateway proxy; do
  unit=$root/lib/systemd/system/bluectl-$command@.service
  grep -q "^ExecStart=/usr/bin/bluectl $command" "$unit" && pass "bluectl-$command@.service runs /usr/bin/bluectl" \
    || fail "bluectl-$command@.service ExecStart: $(grep ExecStart "$unit")"
  if command -v systemd-analyze > /dev/null; then
    # verify wants the binary where the unit says; point it at the installed one
    sed "s|/usr/bin/bluectl|$bin|" "$unit" > "$root/bluectl-$command@test.service"
    systemd-analyze verify "$root/bluectl-$command@test.service" 2>&1 | grep -v "Cannot add dependency job\|bluetooth.service" \
      | grep . && fail "systemd-analyze verify bluectl-$command@" || pass "systemd-analyze verify bluectl-$command@"
  fi
done

files=$(dpkg --root="$root" -L bluectl bluectl-doc | while read -r f; do [ -f "$root$f" ] && echo "$f"; done | wc -l)
dpkg --root="$root" --log=/dev/null --force-depends --force-script-chrootless -r bluectl bluectl-doc > /dev/null 2>&1 || fail "dpkg -r"
left=$(cd "$root" && find . -path ./var -prune -o -type f -print | { grep -v '^\./bluectl-[a-z]*@test.service$' || true; } | wc -l)
[ "$left" = 0 ] && pass "dpkg -r removed all $files files" || fail "dpkg -r left $left files"
rm -f "$root.install.log"

# Scripts/install: the same files under a prefix, from the binary the package was built from
prefix=$root/prefix
if "$REPO/Scripts/install" --prefix "$prefix" --no-build > "$root.install.log" 2>&1; then
  [ "$("$prefix/bin/bluectl" --version)" = "$version" ] && pass "Scripts/install --prefix: bluectl --version = $version" \
    || fail "Scripts/install --prefix: bluectl --version printed '$("$prefix/bin/bluectl" --version 2>&1)'"
  page=$(man_page "$prefix/share/man/man1/bluectl-read.1.gz")
  grep -q "bluectl read \[--adapter" <<< "$page" && grep -q "141" <<< "$page" \
    && pass "Scripts/install --prefix: man -l of its bluectl-read(1)" || fail "Scripts/install --prefix: man -l: $(head -5 <<< "$page")"
  grep -q "^ExecStart=$prefix/bin/bluectl subscribe" "$prefix/lib/systemd/system/bluectl-subscribe@.service" \
    && pass "Scripts/install --prefix: the unit runs PREFIX/bin/bluectl" || fail "Scripts/install --prefix: unit ExecStart"
else
  cat "$root.install.log"; fail "Scripts/install --prefix $prefix"
fi
rm -f "$root.install.log"
status=0
msg=$(timeout 10 "$REPO/Scripts/install" --prefix 2>&1) || status=$?
[ $status = 64 ] && [ "$(wc -l <<< "$msg")" = 1 ] && pass "Scripts/install --prefix without DIR: exit 64, $msg" \
  || fail "Scripts/install --prefix without DIR: exit $status, '$msg'"
exit $failed
