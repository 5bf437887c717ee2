"""``GET /v2.1/servers/{server_id}/diagnostics`` (admin): what Stratus knows of a running server.

Before microversion 2.48 Nova's answer is whatever the virt driver reports. Stratus answers from
the read model only, with the fields of Nova's later, driver-independent shape that it can fill
truthfully (state, driver, hypervisor, uptime, CPUs, memory size); live counters (CPU time, disk and
network I/O) would need the hypervisor worker to report them and are not given: from 2.48,
whose body lists every CPU, NIC and disk, those counters are null, as Nova's schema allows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import falcon

from api import auth, versions
from api.errors import ItemNotFound
from api.readmodel import ReadModel
from api.services import _now
from commands.errors import InvalidState
from commands.states import POWER_STATE_NAMES, VmState
from projections import queries

# Nova refuses diagnostics of a server that is not built yet (or is gone).
_REFUSED = (VmState.BUILDING, VmState.DELETED, VmState.ERROR)


class Diagnostics:
    """``GET /v2.1/servers/{id}/diagnostics``: Nova's server diagnostics (admin only)."""

    def __init__(self, read_model: ReadModel, now: Callable[[], datetime] = _now) -> None:
        self._read = read_model
        self._now = now

    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-server-diagnostics")
        with self._read.connection(req) as conn:
            row = queries.get_server(conn, server_id, None)
            host = queries.get_host(conn, row["host"]) if row is not None and row["host"] else None
        if row is None or row["deleted"]:
            raise ItemNotFound(f"Instance {server_id} could not be found.")
        if row["vm_state"] in _REFUSED:
            raise InvalidState(
                f"Cannot 'get_diagnostics' instance {server_id} while it is in vm_state {row['vm_state']}"
            )
        flavor = row["flavor"] or {}
        launched = row["launched_at"]
        body: dict[str, Any] = {
            "state": POWER_STATE_NAMES.get(row["power_state"], "pending"),
            "driver": "libvirt",
            "hypervisor": (host["hypervisor_type"] if host else "qemu").lower(),
            "hypervisor_os": "linux",
            "uptime": int((self._now() - launched).total_seconds()) if launched else 0,
            "config_drive": bool(row.get("config_drive")),
            "num_cpus": int(flavor.get("vcpus", 0)),
            "memory_details": {"maximum": int(flavor.get("ram", 0))},
        }
        if versions.at_least(req, 48):
            body.update(_details(row, flavor))
        resp.media = body


_NIC_COUNTERS = (
    "rx_octets", "rx_errors", "rx_drop", "rx_packets", "rx_rate",
    "tx_octets", "tx_errors", "tx_drop", "tx_packets", "tx_rate",
)  # fmt: skip
_DISK_COUNTERS = ("read_bytes", "read_requests", "write_bytes", "write_requests", "errors_count")


def _details(row: dict[str, Any], flavor: dict[str, Any]) -> dict[str, Any]:
    """2.48's lists: a CPU per vCPU, a NIC per port, a disk per root/ephemeral/swap disk."""
    ports = list(row.get("ports") or [])
    disks = 1 + (1 if int(flavor.get("ephemeral", 0)) else 0) + (1 if int(flavor.get("swap", 0) or 0) else 0)
    return {
        "num_nics": len(ports),
        "num_disks": disks,
        "memory_details": {"maximum": int(flavor.get("ram", 0)), "used": None},
        "cpu_details": [
            {"id": i, "time": None, "utilisation": None} for i in range(int(flavor.get("vcpus", 0)))
        ],
        "nic_details": [{"mac_address": p.get("mac"), **dict.fromkeys(_NIC_COUNTERS)} for p in ports],
        "disk_details": [dict.fromkeys(_DISK_COUNTERS) for _ in range(disks)],
    }
