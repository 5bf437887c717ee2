"""Registering a hypervisor host (the compute worker does when it starts)."""

from __future__ import annotations

from dataclasses import dataclass

from eventsourcing.persistence import IntegrityError

from commands import loaders
from commands.host import Host
from commands.unit_of_work import Result, UnitOfWork


@dataclass(frozen=True)
class RegisterHost:
    """Register a hypervisor with what it offers."""

    hostname: str
    vcpus: int
    memory_mb: int
    disk_gb: int
    hypervisor_type: str = "QEMU"


def register_host(cmd: RegisterHost, uow: UnitOfWork) -> Result:
    """Register the host; registering an existing one again is a no-op."""
    host = Host.register(
        cmd.hostname, cmd.vcpus, cmd.memory_mb, cmd.disk_gb, hypervisor_type=cmd.hypervisor_type
    )
    try:
        return Result(str(host.id), uow.save(host))
    except IntegrityError:
        existing = loaders.host(uow, cmd.hostname)
        return Result(str(existing.id), uow.app.recorder.max_notification_id() or 0)
