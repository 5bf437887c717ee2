"""Many simulated hypervisor hosts in one process, for tests and benchmarks at cloud scale.

Each simulated host is a real ``HostSteps`` (the hypervisor worker's steps: spawn, delete, power
actions, a resize's or migration's steps) on its own libvirt test driver connection, opened on a
host definition of its own (``test:///<dir>/<host>.xml``: CPUs, memory and a storage pool), so it
registers the inventory libvirt reports and spawns, runs, moves and destroys domains exactly as a
one-host worker does. Where a fleet of workers would need one
consumer per host (each seeing every server scheduled), the simulator has one shared durable consumer,
``simulator``, and hands each event to the host it names; several threads may serve it.

``stratus simulate --hosts N`` runs it (``processes/simulator.py``); ``SimulatedCloud`` is the
composable part.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libvirt

from commands.bus import MessageBus
from stratus.config import Settings
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import NatsBridge
from stratus.eventstore.signing import Verifier
from stratus.hostrpc import CONSOLE, NOT_FOUND, HostRefused, Responder
from workers.console import tail
from workers.consumer import Delivery, DurableConsumer, serve_concurrently
from workers.libvirt_driver import LibvirtDriver
from workers.outcome import DONE, Outcome
from workers.steps import HostSteps, host_of, subjects

log = logging.getLogger(__name__)

SIMULATOR = Actor(user_id="stratus-simulator", project_id="service", roles=("service",))
DURABLE = "simulator"


@dataclass(frozen=True)
class HostShape:
    """The size of each simulated host: CPUs, memory, disk."""

    vcpus: int = 32
    memory_mb: int = 131072
    disk_gb: int = 2000


def host_xml(shape: HostShape) -> str:
    """A libvirt test driver host definition: one NUMA node, ``vcpus`` cores, memory, a storage pool."""
    return f"""<node>
  <cpu><nodes>1</nodes><sockets>1</sockets><cores>{shape.vcpus}</cores><threads>1</threads>
    <active>{shape.vcpus}</active><mhz>2400</mhz><model>x86_64</model></cpu>
  <memory>{shape.memory_mb * 1024}</memory>
  <pool type='dir'><name>default</name><capacity unit='GiB'>{shape.disk_gb}</capacity>
    <allocation>0</allocation><available unit='GiB'>{shape.disk_gb}</available>
    <source/><target><path>/default-pool</path></target></pool>
</node>
"""


def host_names(count: int, prefix: str = "sim") -> list[str]:
    width = max(5, len(str(count)))
    return [f"{prefix}-{i:0{width}d}" for i in range(1, count + 1)]


class SimulatedCloud:
    """Many simulated hosts, each a ``HostSteps`` on its own libvirt test driver connection."""

    def __init__(
        self,
        bus: MessageBus,
        directory: Path,
        names: list[str],
        shape: HostShape = HostShape(),
        open_connection: Callable[[str], libvirt.virConnect] = libvirt.open,
    ) -> None:
        self.hosts: dict[str, HostSteps] = {}
        self._drivers: list[LibvirtDriver] = []
        definition = host_xml(shape)
        for name in names:
            path = directory / f"{name}.xml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(definition)
            uri = f"test://{path.resolve()}"
            driver = LibvirtDriver(_connector(open_connection, uri), instances_path=directory / name)
            self._drivers.append(driver)
            # libvirt's test driver runs no guest, so nothing would write a console log
            self.hosts[name] = HostSteps(
                bus, driver, name, instances_path=directory / name, console_logs=False
            )
        self._bus = bus

    def register(self) -> int:
        """Register every host (each with the inventory its libvirt connection reports)."""
        with acting(CommandContext(actor=SIMULATOR)):
            for steps in self.hosts.values():
                steps.compute.register()
        return len(self.hosts)

    def handle(self, d: Delivery) -> Outcome:
        """Hand one instance event to the simulated host it concerns (others' hosts: acknowledged)."""
        hostname = host_of(d, self._bus)
        steps = self.hosts.get(hostname) if hostname else None
        if steps is None:
            return DONE
        return steps.handle(d)

    def console(self, name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """Host ``name``'s answer to ``os-getConsoleOutput``: libvirt's test driver runs no guest, so a
        simulated guest's console is a boot transcript of its own (marked as simulated), for as long
        as the host holds its domain."""
        driver = self._drivers[list(self.hosts).index(name)]

        def answer(body: dict[str, Any]) -> dict[str, Any]:
            raw = str(body.get("server_id"))
            if raw not in {d.uuid for d in driver.list_domains()}:
                raise HostRefused(NOT_FOUND, f"No guest {raw:.40} on this host")
            length = body.get("length")
            return {
                "output": tail(
                    simulated_boot_log(raw, name).encode(), length if isinstance(length, int) else None
                )
            }

        return answer

    def close(self) -> None:
        for driver in self._drivers:
            driver.close()


def simulated_boot_log(server_id: str, host: str) -> str:
    """The console of a simulated guest: what a small Linux guest prints at boot, said to be simulated."""
    lines = [
        f"[    0.000000] Stratus simulated guest {server_id} on simulated host {host}",
        "[    0.000000] Linux version 6.1.0-simulated (no guest runs under libvirt's test driver)",
        "[    0.010000] Command line: console=ttyS0",
        "[    0.120000] Memory: available",
        "[    0.240000] smpboot: CPU0: simulated",
        "[    0.480000] Run /init as init process",
        "Starting network: OK",
        "Starting sshd: OK",
        f"Welcome to a simulated guest ({server_id})",
        "login: ",
    ]
    return "\n".join(lines)  # ends at the login prompt, as a guest's console does


def _connector(
    open_connection: Callable[[str], libvirt.virConnect], uri: str
) -> Callable[[], libvirt.virConnect]:
    return lambda: open_connection(uri)


def run(
    settings: Settings,
    cloud: SimulatedCloud,
    *,
    bridge: NatsBridge,
    stop: threading.Event,
    threads: int = 8,
    poll: float = 1.0,
    durable: str = DURABLE,
) -> None:
    """Register the hosts, then serve their instances from ``threads`` threads until ``stop``."""
    log.info("simulator: %d hosts registered", cloud.register())
    responders = []
    for name in cloud.hosts:  # each simulated host answers os-getConsoleOutput, as a worker does
        responder = Responder(bridge, name)
        responder.serve(CONSOLE, cloud.console(name))
        responders.append(responder)

    trust = Verifier.load(settings.trust_registry)

    def open_consumer() -> DurableConsumer:
        return DurableConsumer(
            bridge, stream=settings.stream, durable=durable, filter_subjects=subjects(settings), trust=trust
        ).open()

    try:
        serve_concurrently(
            open_consumer, cloud.handle, stop, actor=SIMULATOR, threads=threads, poll=poll, name="simulator"
        )
    finally:
        for responder in responders:
            responder.close()
