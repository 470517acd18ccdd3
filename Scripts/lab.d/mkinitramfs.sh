#!/bin/sh
# Build the lab's tiny initramfs: static busybox + the modules needed to mount
# the host root over virtio-9p, packed with Scripts/lab.d/init. Everything
# else (bluetooth modules, bluetoothd, dbus, python) comes from the host root
# once the guest has mounted it.
# usage: mkinitramfs.sh KVER OUTPUT.cpio.gz
set -eu
KVER=$1 OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(mktemp -d "${OUT%/*}/initramfs-src.XXXXXX")
trap 'rm -rf "$SRC"' EXIT
mkdir -p "$SRC"/bin "$SRC"/mods "$SRC"/proc "$SRC"/sys "$SRC"/dev "$SRC"/newroot
BB=$(command -v busybox || echo /bin/busybox)
if ldd "$BB" >/dev/null 2>&1; then
  echo "mkinitramfs: $BB is dynamically linked; install busybox-static" >&2; exit 1
fi
cp "$BB" "$SRC"/bin/busybox
# load order matters (dependencies first); names as in modules.dep. Modules
# built into the kernel (or missing from this kernel version) are skipped.
MODS="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
      netfs fscache 9pnet 9pnet_virtio 9p"
ORDER=""
for m in $MODS; do
  f=$(find /lib/modules/"$KVER"/kernel -name "$m.ko*" | head -1)
  if [ -z "$f" ]; then
    if grep -qE "/$m\.ko\$" /lib/modules/"$KVER"/modules.builtin 2>/dev/null; then continue; fi
    case $m in virtio_pci_legacy_dev|virtio_pci_modern_dev|netfs|fscache) continue;; esac
    echo "mkinitramfs: module $m not found for kernel $KVER" >&2; exit 1
  fi
  case $f in
    *.ko) cp "$f" "$SRC/mods/$m.ko" ;;
    *.ko.xz) xz -dc "$f" > "$SRC/mods/$m.ko" ;;
    *.ko.zst) zstd -qdc "$f" > "$SRC/mods/$m.ko" ;;
    *.ko.gz) gzip -dc "$f" > "$SRC/mods/$m.ko" ;;
    *) echo "mkinitramfs: unknown module format $f" >&2; exit 1 ;;
  esac
  ORDER="$ORDER $m"
done
echo "$ORDER" > "$SRC"/mods/order
cp "$HERE"/init "$SRC"/init
chmod +x "$SRC"/init
(cd "$SRC" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
