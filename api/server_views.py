"""How Nova shows a server, per microversion: the brief and detailed views, their parts (image,
flavor, addresses, fault, extended attributes) and what a page of servers needs besides its rows
(``ServerExtras``). Pure functions of a read-model row and the request's microversion; the
resources that answer with them are in ``api/servers.py`` and ``api/server_actions.py``.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import falcon

from api import auth
from api.links import bookmark, resource_links
from api.versions import at_least, minor_of
from commands.host_aggregate import DEFAULT_ZONE
from stratus.context import Actor
from stratus.hostname import hostname_for
from stratus.imagestore import BlobStore, StoreError

log = logging.getLogger("stratus.api")

# The image properties a server keeps from its image (``Image.boot_snapshot``) that Nova's image
# metadata knows; shown under ``image.properties`` from 2.98.
IMAGE_PROPERTIES = ("os_command_line",)
DISK_CONFIG = "MANUAL"  # Stratus never resizes a guest's root partition.
# Statuses in which Nova shows `progress`, and in which it shows the `fault`.
_PROGRESS_STATUSES = ("ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING")
_FAULT_STATUSES = ("ERROR", "DELETED")


def host_id(project_id: str, host: str | None) -> str:
    """Nova's ``hostId``: the same for two servers of one project on one host, opaque across projects."""
    if not host:
        return ""
    return hashlib.sha224((project_id + host).encode()).hexdigest()


def isotime(value: datetime | None) -> str | None:
    if value is None:
        return None
    utc = value.astimezone(UTC)
    if utc.year < 1000:  # isoformat pads the year to four digits; strftime's %Y does not
        return utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    # the same text as strftime("%Y-%m-%dT%H:%M:%SZ"), at a fraction of the cost (two a row in a
    # list): "YYYY-MM-DDTHH:MM:SS" then the offset ("+00:00"), which "Z" replaces
    return utc.isoformat(timespec="seconds")[:19] + "Z"


def _usage_time(value: datetime | None) -> str | None:
    """OS-SRV-USG timestamps are naive ISO 8601 in UTC with microseconds, as Nova prints them."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None).isoformat()


def brief_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    sid = str(row["id"])
    return {"id": sid, "name": row["name"], "links": resource_links(req, "servers", sid)}


def detail_view(
    req: falcon.Request,
    row: dict[str, Any],
    actor: Actor,
    extras: ServerExtras | None = None,
    *,
    group: str | None = None,
    single: bool = False,
    basic: bool = False,
) -> dict[str, Any]:
    """The server as Nova shows it at the request's microversion (``versions.at_least``).

    ``group`` is the server group it belongs to; ``single`` marks a show, update or rebuild answer
    (2.71's ``server_groups`` is in those only); ``basic`` marks an update or rebuild answer, which
    before 2.75 leaves out the extended attributes, as Nova's."""
    sid = str(row["id"])
    minor = minor_of(req)  # at_least(req, n) is minor >= n
    status = row["status"]
    flavor = row["flavor"] or {}
    host = row["host"]
    admin = auth.is_admin(actor)
    server: dict[str, Any] = {
        "id": sid,
        "name": row["name"],
        "status": status,
        "tenant_id": row["project_id"],
        "user_id": row["user_id"],
        "metadata": row["metadata"] or {},
        "hostId": host_id(row["project_id"], host),
        "image": image_view(req, row),
        "flavor": flavor_view(req, flavor),
        "created": isotime(row["created_at"]),
        "updated": isotime(row["updated_at"]),
        # update's and rebuild's addresses lack the extension keys before 2.75, as their other fields
        "addresses": addresses_view(row.get("ports") or [], extended=not basic or minor >= 75),
        "accessIPv4": row.get("access_ip_v4") or "",
        "accessIPv6": row.get("access_ip_v6") or "",
        "links": resource_links(req, "servers", sid),
        "OS-DCF:diskConfig": row.get("disk_config") or DISK_CONFIG,
    }
    if status in _PROGRESS_STATUSES:
        server["progress"] = 100 if status == "ACTIVE" else 0
    if not basic or minor >= 75:
        server.update(_extended_view(minor, sid, row, admin, extras))
    if minor >= 9:
        server["locked"] = row.get("locked_by") is not None
    if minor >= 19:
        server["description"] = row.get("description")
    if minor >= 26:
        server["tags"] = list(row.get("tags") or [])
    if minor >= 63:
        server["trusted_image_certificates"] = None  # Stratus verifies no image signatures
    if minor >= 71 and single:
        server["server_groups"] = [group] if group else []
    if minor >= 73:
        server["locked_reason"] = row.get("locked_reason")
    if minor >= 96:
        server["pinned_availability_zone"] = row["availability_zone"] or None
    if minor >= 100:
        server["scheduler_hints"] = {"group": group} if group else {}
    fault = row["fault"]
    if fault and status in _FAULT_STATUSES:
        server["fault"] = fault_view(fault, row, actor)
    return server


def _extended_view(
    minor: int, sid: str, row: dict[str, Any], admin: bool, extras: ServerExtras | None
) -> dict[str, Any]:
    """The extension attributes of Nova's show and list (update and rebuild too from 2.75), at the
    microversion 2.``minor`` (``minor_of``)."""
    host = row["host"]
    view: dict[str, Any] = {
        "key_name": row.get("key_name"),
        "config_drive": "True" if row.get("config_drive") else "",  # Nova's string field
        "OS-EXT-AZ:availability_zone": _zone(row),
        "OS-EXT-STS:vm_state": row["vm_state"],
        "OS-EXT-STS:task_state": row["task_state"],
        "OS-EXT-STS:power_state": row["power_state"],
        "OS-SRV-USG:launched_at": _usage_time(row["launched_at"]),
        "OS-SRV-USG:terminated_at": _usage_time(row["deleted_at"]),
        "os-extended-volumes:volumes_attached": [],
    }
    if admin:
        view["OS-EXT-SRV-ATTR:host"] = host
        view["OS-EXT-SRV-ATTR:hypervisor_hostname"] = host
        view["OS-EXT-SRV-ATTR:instance_name"] = f"instance-{sid}"  # the libvirt domain's name
        if minor >= 3:
            view.update(_extended_attributes(row, extras))
    elif minor >= 90:  # from 2.90 every user sees the hostname
        view["OS-EXT-SRV-ATTR:hostname"] = server_hostname(row)
    if minor >= 16 and admin:
        view["host_status"] = extras.host_status(host) if extras is not None else ""
    return view


def image_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any] | str:
    """The image as a link ("" for a server without one); from 2.98 with the properties it kept."""
    image_ref = row["image_ref"] or ""
    if not image_ref:
        return ""
    view: dict[str, Any] = {"id": image_ref, "links": bookmark(req, "images", image_ref)}
    if at_least(req, 98):
        kept = row.get("image") or {}
        view["properties"] = {k: str(kept[k]) for k in IMAGE_PROPERTIES if kept.get(k) is not None}
    return view


def _zone(row: dict[str, Any]) -> str:
    """The zone asked for; else, once placed, the zone of its host (the default zone when the host
    is in none); "" before placement, as Nova."""
    if row["availability_zone"]:
        return str(row["availability_zone"])
    if not row["host"]:
        return ""
    return str(row.get("host_zone") or DEFAULT_ZONE)


def flavor_view(req: falcon.Request, flavor: dict[str, Any]) -> dict[str, Any]:
    """A link to the flavor before 2.47; from 2.47 the flavor as the server was built with it."""
    if not at_least(req, 47):
        flavor_id = str(flavor.get("id", ""))
        return {"id": flavor_id, "links": bookmark(req, "flavors", flavor_id)}
    return {
        "vcpus": flavor.get("vcpus", 0),
        "ram": flavor.get("ram", 0),
        "disk": flavor.get("disk", 0),
        "ephemeral": flavor.get("ephemeral", 0),
        "swap": flavor.get("swap", 0),
        "original_name": flavor.get("name", ""),
        "extra_specs": dict(flavor.get("extra_specs") or {}),
    }


def _extended_attributes(row: dict[str, Any], extras: ServerExtras | None) -> dict[str, Any]:
    """2.3's extended server attributes (admins): reservation, launch index, hostname, boot files."""
    image = row.get("image") or {}
    return {
        "OS-EXT-SRV-ATTR:reservation_id": row.get("reservation_id"),
        "OS-EXT-SRV-ATTR:launch_index": row.get("launch_index") or 0,
        "OS-EXT-SRV-ATTR:hostname": server_hostname(row),
        "OS-EXT-SRV-ATTR:kernel_id": image.get("kernel_id") or "",
        "OS-EXT-SRV-ATTR:ramdisk_id": image.get("ramdisk_id") or "",
        # guests boot their kernel directly, with no root disk device
        "OS-EXT-SRV-ATTR:root_device_name": None,
        "OS-EXT-SRV-ATTR:user_data": extras.user_data(row.get("user_data")) if extras is not None else None,
    }


def server_hostname(row: dict[str, Any]) -> str:
    """The hostname asked for (2.90), else the one Nova derives from the name."""
    return str(row.get("hostname") or hostname_for(row["name"]))


class ServerExtras:
    """What a page of servers needs beyond its rows, fetched once per request: the state of the
    hosts they run on (2.16's ``host_status``) and their user data (2.3, admins)."""

    def __init__(
        self,
        services: dict[str, dict[str, Any]],
        alive: Callable[[list[str]], dict[str, bool]] | None,
        blobs: BlobStore | None,
    ) -> None:
        self._services = services
        self._alive = alive
        self._up: dict[str, bool] = {}
        self._blobs = blobs

    def host_status(self, host: str | None) -> str:
        """Nova's values: "" without a host; DOWN, MAINTENANCE (disabled) or UP; UNKNOWN if unknown."""
        if not host:
            return ""
        service = self._services.get(host)
        if service is None:
            return "UNKNOWN"
        if service["forced_down"]:
            return "DOWN"
        if self._alive is not None:
            if host not in self._up:
                self._up.update(self._alive([host]))
            if not self._up.get(host, False):
                return "DOWN"
        return "MAINTENANCE" if service["disabled"] else "UP"

    def user_data(self, filed: dict[str, Any] | None) -> str | None:
        return read_user_data(self._blobs, filed)


def read_user_data(blobs: BlobStore | None, filed: dict[str, Any] | None) -> str | None:
    """The user data filed at ``filed``, base64 as Nova shows it (None if there is none)."""
    if not filed or blobs is None:
        return None
    blob = filed.get("id") or filed.get("sha256")  # rows projected before version 5: "sha256"
    try:
        return base64.b64encode(blobs.get(str(blob))).decode()
    except StoreError as e:  # an API node without the blob (e.g. no shared data directory)
        log.warning("user data %s not shown: %s", blob, e)
        return None


def addresses_view(ports: list[dict[str, Any]], *, extended: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Nova's ``addresses``: per network name, the fixed addresses (``extended``: with their type
    and MAC, the extension keys)."""
    addresses: dict[str, list[dict[str, Any]]] = {}
    for port in ports:
        address: dict[str, Any] = {"addr": port["address"], "version": 4}
        if extended:
            address.update({"OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": port["mac"]})
        addresses.setdefault(port["network_name"], []).append(address)
    return addresses


def fault_view(fault: dict[str, Any], row: dict[str, Any], actor: Actor) -> dict[str, Any]:
    """Nova's fault: an HTTP-like code (500 for a failed build), details only for admins at 500."""
    code = fault.get("code")
    status_code = code if isinstance(code, int) else 500
    view: dict[str, Any] = {
        "code": status_code,
        "message": fault.get("message", ""),
        "created": _fault_time(fault.get("created")) or isotime(row["updated_at"]),
    }
    details = fault.get("details")
    if details and (auth.is_admin(actor) or status_code != 500):
        view["details"] = details
    return view


def _fault_time(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return isotime(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None
