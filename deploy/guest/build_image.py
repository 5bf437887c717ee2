#!/usr/bin/env python3
"""Build a tiny bootable guest for a real-QEMU test: a Debian cloud kernel and a busybox initramfs.

    python3 deploy/guest/build_image.py OUT_DIR

writes ``OUT_DIR/vmlinuz``, ``OUT_DIR/initrd`` and ``OUT_DIR/cmdline``: upload the first two to the
image service (``aki``/``ari``) and name them in an image's ``kernel_id``/``ramdisk_id`` properties,
with the third as its ``os_command_line`` (docs/images.md). Nothing on the host changes: the kernel
comes from the Debian package ``linux-image-*-cloud-amd64`` fetched with ``apt-get download`` and
unpacked with ``dpkg-deb -x``; busybox from ``busybox-static`` the same way. The initramfs's
``/init`` mounts the kernel filesystems, loads ``evdev`` and ``button`` (so the ACPI power button
reaches user space), starts busybox ``acpid`` whose power-button action powers the guest off, and
prints the marker line ``STRATUS-GUEST-READY`` on the serial console (``ttyS0``). A guest with a
config drive (an IDE cdrom labelled ``config-2``) then mounts it and prints ``STRATUS-CONFIG-DRIVE
uuid=<its uuid>`` and its user data. A guest with a NIC (the metadata network of
docs/metadata.md: virtio-net on 169.254.0.0/16) fetches its ``meta_data.json`` from
``http://169.254.169.254/openstack/latest/`` and prints it between ``STRATUS-METADATA begin`` and
``STRATUS-METADATA end``. A busybox shell then reads the serial console (the serial
console's test types into it). A libvirt reboot
of such a guest goes through the same power button (QEMU's fake reboot): the marker appears again.

Only the Python standard library, ``apt-get`` and ``dpkg-deb`` are needed (the cpio archive is
written here, no ``cpio`` binary). Runs in ~10 s with the packages cached by apt.
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = "STRATUS-GUEST-READY"
CONFIG_DRIVE = "STRATUS-CONFIG-DRIVE"
METADATA = "STRATUS-METADATA"
# Loaded in this order (each after what it depends on): evdev and button for the ACPI power button;
# the IDE controller, the SCSI cdrom and ISO 9660 for a config drive; virtio-net for the metadata
# network.
MODULES = (
    "evdev", "button", "scsi_common", "scsi_mod", "libata", "ata_piix", "cdrom", "sr_mod", "isofs",
    "virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "failover",
    "net_failover", "virtio_net",
)  # fmt: skip
CMDLINE = "console=ttyS0 quiet panic=-1"
KERNEL_META = "linux-image-cloud-amd64"

INIT = f"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /run
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec >/dev/console 2>&1 </dev/console
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
for m in {" ".join(MODULES)}; do insmod "/lib/modules/$m.ko" 2>/dev/null; done
acpid -c /etc/acpi -l /tmp/acpid.log
echo "{MARKER}"
(
  # A config drive (the IDE cdrom, once the bus has been scanned; the config-2 image is the only
  # medium Stratus gives a guest): mount it and print the server's uuid and user data.
  for i in $(seq 60); do [ -b /dev/sr0 ] && break; sleep 0.5; done
  if [ -b /dev/sr0 ] && mkdir -p /mnt/config && mount -t iso9660 -o ro /dev/sr0 /mnt/config; then
    md=/mnt/config/openstack/latest
    echo "{CONFIG_DRIVE} uuid=$(sed 's/.*"uuid":"\\([^"]*\\)".*/\\1/' $md/meta_data.json)"
    echo "{CONFIG_DRIVE} user_data:"; cat $md/user_data 2>/dev/null; echo; echo "{CONFIG_DRIVE} end"
  fi
) &
(
  # A NIC (the metadata network, the only one Stratus gives a guest): an address in 169.254.0.0/16,
  # where 169.254.169.254 is the metadata service; print the server's meta_data.json.
  if [ -e /sys/class/net/eth0 ] && ip link set eth0 up && ip addr add 169.254.0.15/16 dev eth0; then
    for i in $(seq 20); do  # (no -T: Debian 12's static busybox wget crashes with a timeout)
      if md=$(wget -q -O - http://169.254.169.254/openstack/latest/meta_data.json); then
        echo "{METADATA} begin"; echo "$md"; echo "{METADATA} end"; break
      fi
      sleep 1
    done
  fi
) &
# A shell on the serial console, for the serial console's test (tests/acceptance/test_console_guest.py):
# what is typed there is run, and its output (and the tty's echo) goes back out of the serial port.
while true; do sh; sleep 1; done
"""
# busybox acpid maps the power button to the event PWRF/00000080 and runs that file from its
# config directory.
POWER_BUTTON = "#!/bin/sh\necho 'stratus guest: ACPI power button, powering off' >/dev/console\npoweroff -f\n"


def run(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout


def kernel_package() -> str:
    """The concrete kernel package the metapackage depends on, e.g. linux-image-6.1.0-56-cloud-amd64."""
    for line in run("apt-cache", "depends", KERNEL_META).splitlines():
        line = line.strip()
        if line.startswith("Depends:") and "linux-image-" in line:
            return line.split(":", 1)[1].strip()
    raise SystemExit(f"cannot resolve {KERNEL_META}: is it in the apt sources? (apt-get update)")


def unpack(package: str, work: Path) -> Path:
    """``apt-get download`` the package and ``dpkg-deb -x`` it; the directory it was unpacked to."""
    run("apt-get", "download", package, cwd=work)
    (deb,) = work.glob(f"{package}_*.deb")
    root = work / package
    run("dpkg-deb", "-x", str(deb), str(root))
    return root


def module(root: Path, name: str) -> bytes:
    found = sorted(root.glob(f"lib/modules/*/kernel/**/{name}.ko*"))
    if not found:
        raise SystemExit(f"module {name} not found in the kernel package")
    data = found[0].read_bytes()
    return lzma.decompress(data) if found[0].suffix == ".xz" else data


class Cpio:
    """A ``newc`` cpio archive (what the kernel unpacks as an initramfs), written in memory."""

    def __init__(self) -> None:
        self._out = io.BytesIO()
        self._ino = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        namez = name.encode() + b"\0"
        fields = [self._ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(namez), 0]
        self._ino += 1
        self._out.write(b"070701" + b"".join(b"%08X" % f for f in fields) + namez)
        self._pad()
        self._out.write(data)
        self._pad()

    def _pad(self) -> None:
        self._out.write(b"\0" * (-self._out.tell() % 4))

    def dir(self, name: str) -> None:
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | mode, data)

    def chardev(self, name: str, major: int, minor: int) -> None:
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def close(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        return self._out.getvalue()


def initramfs(busybox: bytes, modules: dict[str, bytes]) -> bytes:
    cpio = Cpio()
    for d in (
        "bin",
        "sbin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "etc",
        "etc/acpi",
        "etc/acpi/PWRF",
        "lib",
        "lib/modules",
    ):
        cpio.dir(d)
    cpio.chardev("dev/console", 5, 1)
    cpio.file("bin/busybox", busybox, 0o755)
    cpio.file("init", INIT.encode(), 0o755)
    cpio.file("etc/acpi/PWRF/00000080", POWER_BUTTON.encode(), 0o755)
    for name, data in modules.items():
        cpio.file(f"lib/modules/{name}.ko", data)
    return gzip.compress(cpio.close(), compresslevel=6)


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stratus-guest-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # apt-get download may drop privileges to _apt
        kernel_root = unpack(kernel_package(), work)
        busybox_root = unpack("busybox-static", work)
        (vmlinuz,) = kernel_root.glob("boot/vmlinuz-*")
        shutil.copyfile(vmlinuz, out / "vmlinuz")
        modules = {name: module(kernel_root, name) for name in MODULES}
        busybox = (busybox_root / "bin" / "busybox").read_bytes()
    (out / "initrd").write_bytes(initramfs(busybox, modules))
    (out / "cmdline").write_text(CMDLINE + "\n")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    build(Path(argv[1]))
    print(f"guest written to {argv[1]}: vmlinuz, initrd, cmdline (marker {MARKER})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
