"""A real guest on real QEMU (TCG), driven through the API: boot, stop (ACPI), start, reboot, delete.

The test provides what it needs and owns what it starts (``tests.fixtures.qemu``: QEMU, libvirt and
tini installed with apt-get when missing, libvirt's QEMU driver prepared as FIELD-NOTES describe,
``libvirtd`` started unless one answers, the guest built by ``deploy/guest/build_image.py``); without
root or a network it skips and says why.
The kernel and initramfs are uploaded through the image service, the server booted through the
Compute API, and at each step the API's view and libvirt's agree; the guest's serial console, read
through ``os-getConsoleOutput``, shows the marker of every boot, and the server's uuid and user
data the guest read from its config drive.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from pathlib import Path
from typing import Any

import libvirt
import pytest

from stratus.config import Settings
from stratus.eventstore import NatsBridge
from tests.fixtures import qemu
from tests.fixtures.api import P1, Stack
from tests.fixtures.guests import boot_guest, remove_guest, wait
from tests.fixtures.hypervisor import stack_host
from workers.libvirt_driver import LibvirtDriver

pytestmark = pytest.mark.slow

URI = qemu.URI
HOST = "qemu-guest-host"
MARKER = qemu.MARKER
CONFIG_DRIVE = "STRATUS-CONFIG-DRIVE"  # deploy/guest/build_image.py's lines about its config drive
USER_DATA = b"#!/bin/sh\necho stratus config drive user data\n"


@dataclasses.dataclass
class Guest:
    stack: Stack
    conn: libvirt.virConnect
    server_id: str = ""

    def api(self) -> dict[str, Any] | None:
        r = self.stack.get(f"/v2.1/servers/{self.server_id}", P1)
        if r.status_code == 404:
            return None
        assert r.status_code == 200, r.text
        server: dict[str, Any] = r.json["server"]
        assert server["status"] != "ERROR", server.get("fault")
        return server

    def settled(self, status: str, timeout: float = 60) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            s = self.api()
            return s if s and s["status"] == status and s["OS-EXT-STS:task_state"] is None else None

        return wait(f"status {status}", check, timeout)

    def action(self, body: dict[str, Any]) -> Any:
        return self.stack.request("POST", f"/v2.1/servers/{self.server_id}/action", P1, json=body)

    def console(self) -> str:
        r = self.action({"os-getConsoleOutput": {}})
        if r.status_code == 404:
            return ""  # QEMU has not opened the log yet
        assert r.status_code == 200, r.text
        return str(r.json["output"])

    def boots(self, count: int, timeout: float = 90) -> str:
        """Wait until the console shows the marker ``count`` times (one per boot)."""
        return wait(
            f"{count} boot markers", lambda: (c := self.console()).count(MARKER) >= count and c, timeout
        )

    def libvirt_state(self) -> int:
        return int(self.conn.lookupByUUIDString(self.server_id).state()[0])


def test_a_real_guest_boots_stops_starts_reboots_and_is_deleted(
    stack: Stack, api_settings: Settings, bridge: NatsBridge, guest_files: Path, tmp_path: Path
) -> None:
    started = time.monotonic()
    instances = tmp_path / "instances"
    instances.mkdir()
    driver = LibvirtDriver.open(URI, instances_path=instances, shutdown_timeout=30.0)
    conn = libvirt.open(URI)

    worker = stack_host(stack.handlers.app, api_settings, bridge, driver, instances, poll=0.2, host=HOST)
    guest = Guest(stack, conn)
    try:
        user_data = base64.b64encode(USER_DATA).decode()
        guest.server_id = boot_guest(
            stack, guest_files, HOST, name="real", config_drive=True, user_data=user_data
        )

        server = guest.settled("ACTIVE")
        assert server["OS-EXT-STS:power_state"] == 1 and guest.libvirt_state() == libvirt.VIR_DOMAIN_RUNNING
        guest.boots(1)
        # The guest mounted its config drive (an ISO 9660 cdrom labelled config-2) and printed it.
        drive = wait(
            "the config drive's lines", lambda: (c := guest.console()).count(f"{CONFIG_DRIVE} end") and c, 60
        )
        assert f"{CONFIG_DRIVE} uuid={guest.server_id}" in drive
        printed = drive.split(f"{CONFIG_DRIVE} user_data:", 1)[1].replace("\r\n", "\n")  # a serial tty's
        assert USER_DATA.decode() in printed
        assert server["config_drive"] == "True"
        assert (instances / guest.server_id / "disk.config").is_file()

        assert guest.action({"os-stop": None}).status_code == 202
        server = guest.settled("SHUTOFF")
        assert server["OS-EXT-STS:power_state"] == 4 and guest.libvirt_state() == libvirt.VIR_DOMAIN_SHUTOFF
        assert "ACPI power button" in guest.console()  # a clean shutdown, not a pulled plug

        assert guest.action({"os-start": None}).status_code == 202
        server = guest.settled("ACTIVE")
        assert server["OS-EXT-STS:power_state"] == 1 and guest.libvirt_state() == libvirt.VIR_DOMAIN_RUNNING
        guest.boots(2)

        assert guest.action({"reboot": {"type": "SOFT"}}).status_code == 202
        guest.settled("ACTIVE")
        guest.boots(3)  # the guest's ACPI power button, then started again (as Nova reboots softly)
        assert guest.libvirt_state() == libvirt.VIR_DOMAIN_RUNNING

        assert guest.action({"reboot": {"type": "HARD"}}).status_code == 202
        guest.settled("ACTIVE")
        guest.boots(4)
        assert guest.libvirt_state() == libvirt.VIR_DOMAIN_RUNNING

        assert stack.request("DELETE", f"/v2.1/servers/{guest.server_id}", P1).status_code == 204
        wait("the server to be gone", lambda: guest.api() is None, 60)
        with pytest.raises(libvirt.libvirtError):
            conn.lookupByUUIDString(guest.server_id)
        assert not (instances / guest.server_id / "disk.config").exists()  # gone with the guest
    finally:
        worker.close()
        remove_guest(conn, guest.server_id)
        conn.close()
        driver.close()
    assert time.monotonic() - started < 150
