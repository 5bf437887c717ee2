"""A hypervisor worker process for the crash tests:
``python -m tests.integration.hypervisor_child MODE SIGNAL``.

Settings come from the environment (``Settings.from_env``), the hypervisor is libvirt's test driver
on ``STRATUS_LIBVIRT_URI``. ``MODE`` says where the worker hangs, after writing ``SIGNAL``, so that
the test can ``kill -9`` it in the middle of a step: ``spawn`` (after the domain was started, before
the outcome is recorded) or ``destroy`` (before the domain is torn down). It implements our own
port (``workers.virt.VirtDriver``) around the real libvirt driver.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from commands.app import Stratus
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from workers import hypervisor
from workers.libvirt_driver import LibvirtDriver
from workers.virt import DomainInfo, GuestSpec, HostInventory


class HangingDriver:
    def __init__(self, inner: LibvirtDriver, mode: str, signal: Path) -> None:
        self.inner = inner
        self.mode = mode
        self.signal = signal

    def _hang(self) -> None:
        self.signal.write_text("hanging")
        while True:
            time.sleep(60)  # until SIGKILL

    def inventory(self) -> HostInventory:
        return self.inner.inventory()

    def spawn(self, guest: GuestSpec) -> int:
        state = self.inner.spawn(guest)
        if self.mode == "spawn":
            self._hang()
        return state

    def destroy(self, uuid: str) -> None:
        if self.mode == "destroy":
            self._hang()
        self.inner.destroy(uuid)

    def power_state(self, uuid: str) -> int:
        return self.inner.power_state(uuid)

    def list_domains(self) -> Sequence[DomainInfo]:
        return self.inner.list_domains()

    def close(self) -> None:
        self.inner.close()


def main(mode: str, signal: str) -> None:
    settings = Settings.from_env()
    driver = HangingDriver(LibvirtDriver.open(settings.libvirt_uri), mode, Path(signal))
    with NatsBridge(settings.nats_urls, name="crash-child") as bridge:
        app = Stratus(Factory(bridge=bridge, settings=settings))
        hypervisor.run(settings, bridge=bridge, app=app, driver=driver, stop=threading.Event(), poll=0.1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
