#!/bin/sh
# Builds the lab's btvirt: BlueZ's emulator from Debian's source package of
# the installed bluez (apt-get source, through a private deb-src list made
# from this machine's own apt sources), with btvirt-same-handle.patch. The
# packaged btvirt 5.66 gives a central's second connection another handle on
# the peripheral's controller than the one both hosts are told, and that
# peripheral's packets are dropped (Tests/Lab/README.md).
# usage: build-btvirt.sh VERSION OUT    (VERSION: the bluez package's, e.g. 5.66-1+deb12u2)
# Needs gcc, libc6-dev, patch, xz-utils; the work directory is OUT.build (kept for a look).
set -eu
ver=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$out.build
rm -rf "$work"
mkdir -p "$work/parts" "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
# deb-src twins of the machine's enabled deb sources (deb822 and one-line formats)
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sed -n '/^Types:/!p; /^Types:.*\bdeb\b/s/.*/Types: deb-src/p' "$f" > "$work/parts/$(basename "$f")"
done
: > "$work/src.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f" >> "$work/src.list"
done
apt_src() {
  apt-get -q -o Dir::Etc::SourceList="$work/src.list" -o Dir::Etc::SourceParts="$work/parts" \
    -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" -o APT::Sandbox::User=root "$@"
}
apt_src update > "$work/apt-update.log" 2>&1 || { cat "$work/apt-update.log" >&2; exit 1; }
(cd "$work/src" && { apt_src source --download-only "bluez=$ver" || apt_src source --download-only bluez; }) > "$work/apt-source.log" 2>&1 \
  || { cat "$work/apt-source.log" >&2; exit 1; }
orig=$(ls "$work"/src/bluez_*.orig.tar.* | head -1)
tar -C "$work/src" -xf "$orig"
b=$(ls -d "$work"/src/bluez-*/ | head -1)
patch -d "$b" -p1 < "$here/btvirt-same-handle.patch"
mkdir -p "$b/lib/bluetooth"
cp "$b"/lib/*.h "$b/lib/bluetooth/"
printf '#define VERSION "%s"\n#define PACKAGE "bluez"\n' "${ver%%-*}-lab" > "$work/config.h"
# the sources of emulator_btvirt (Makefile.tools), libshared-mainloop's and lib/'s that it uses
(cd "$b" && gcc -O2 -w -I. -Ilib -include "$work/config.h" -o "$out.new" \
  emulator/main.c emulator/serial.c emulator/server.c emulator/vhci.c emulator/btdev.c \
  emulator/bthost.c emulator/smp.c emulator/phy.c emulator/amp.c emulator/le.c \
  src/shared/queue.c src/shared/util.c src/shared/crypto.c src/shared/ecc.c src/shared/mainloop.c \
  src/shared/timeout-mainloop.c src/shared/io-mainloop.c src/shared/mainloop-notify.c \
  lib/bluetooth.c lib/hci.c)
mv "$out.new" "$out"
echo "built $out from $(basename "$orig") + btvirt-same-handle.patch"
