"""How Nova shows a server, per microversion: the brief and detailed views, their parts (addresses,
fault) and what a page of servers needs besides its rows (``ServerExtras``). Pure functions of a
read-model row (``projections.queries.ServerRow``: times already formatted, jsonb columns as text,
decoded only where the microversion shows them) and the request; the detailed view is made once a
request (``server_view``) and then applied to each row. The resources that answer with them are in
``api/servers.py`` and ``api/server_actions.py``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

import falcon
from orjson import Fragment

from api import auth
from api.links import API_ROOT, links_json, quoted
from api.timestamps import isotime
from api.versions import minor_of
from commands.host_aggregate import DEFAULT_ZONE
from commands.states import PowerState
from projections.queries import ServerRow, decode_json
from stratus.context import Actor
from stratus.hostname import hostname_for
from stratus.imagestore import BlobStore, StoreError
from stratus.serialization import dumps

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
    return _host_id(project_id, host)


@functools.lru_cache(maxsize=4096)
def _host_id(project_id: str, host: str) -> str:
    # kept across requests: a page of servers spread over many hosts hashed each of them (~0.6 us
    # each, half of a page's distinct hosts) on every request
    return hashlib.sha224((project_id + host).encode()).hexdigest()


# A server's hostname when it was given none (two regular expressions, ~1 us a row, on each page that
# shows it): kept across requests, as names change seldom.
_hostname_for = functools.lru_cache(maxsize=4096)(hostname_for)


ServerView = Callable[[ServerRow, "str | None"], dict[str, Any]]


def brief_view_of(req: falcon.Request) -> ServerView:
    """How ``GET /servers`` shows each row of a page (id, name, links; a server group is not shown):
    the links already serialized (``orjson.Fragment``, the same bytes, as ``server_view``'s
    ``listed``'s), made around the id from their prefixes read once a page."""
    links_self, links_bookmark = links_json(req, "servers")

    def view(row: ServerRow, group: str | None = None) -> dict[str, Any]:
        sid = row.id  # a uuid's text is its own quoted form
        return {"id": sid, "name": row.name, "links": Fragment(f'{links_self}{sid}{links_bookmark}{sid}"}}]')}

    return view


def server_view(
    req: falcon.Request,
    actor: Actor,
    extras: ServerExtras | None = None,
    *,
    single: bool = False,
    basic: bool = False,
    down: Collection[str] = (),
    listed: bool = False,
) -> ServerView:
    """How the request shows a server (``ServerRow``) and the server group it is in: Nova's detailed
    view at the request's microversion, for ``actor`` (admins see the extended attributes).

    ``single`` marks a show, update or rebuild answer (2.71's ``server_groups`` is in those only);
    ``basic`` an update or rebuild answer, which before 2.75 leaves out the extended attributes, as
    Nova's. ``down``: hosts that stopped sending heartbeats, on which a guest's power state is
    unknown (NOSTATE), not the last one recorded. What depends on the request alone (the
    microversion's fields, the role, the links' prefixes) is settled here once; the view then costs
    a few microseconds a row.

    ``listed``: for a page of a list, whose body only orjson serializes (``stratus.serialization``):
    the links, images and flavors are then already serialized (``orjson.Fragment``, the same bytes
    as the objects would serialize to), made once a page (images and flavors) or from the page's
    links' serialized prefixes, instead of objects serialized again for every row."""
    minor = minor_of(req)
    admin = auth.is_admin(actor)
    extended = not basic or minor >= 75  # update's and rebuild's lack the extension keys before 2.75
    attributes = admin and minor >= 3  # 2.3's extended server attributes
    hostname_shown = not admin and minor >= 90  # from 2.90 every user sees the hostname
    host_status = admin and minor >= 16
    flavor_link = minor < 47  # a link to the flavor before 2.47, the flavor itself from it
    image_properties = minor >= 98
    prefix = req.prefix
    self_href = f"{prefix}/{API_ROOT}/servers/"
    bookmark_href = f"{prefix}/servers/"
    image_href = f"{prefix}/images/"
    flavor_href = f"{prefix}/flavors/"
    links_self, links_bookmark = links_json(req, "servers")  # around a server's id (a uuid: no escaping)
    user_data = extras.user_data if extras is not None else None
    status_of = extras.host_status if extras is not None else None

    def image_view(image_ref: str, image_json: str | None) -> dict[str, Any] | str:
        if not image_ref:
            return ""
        image: dict[str, Any] = {
            "id": image_ref,
            "links": [{"rel": "bookmark", "href": image_href + quoted(image_ref)}],
        }
        if image_properties:
            kept = decode_json(image_json) or {}
            image["properties"] = {k: str(kept[k]) for k in IMAGE_PROPERTIES if kept.get(k) is not None}
        return image

    def flavor_view(flavor_json: str) -> dict[str, Any]:
        flavor = decode_json(flavor_json) or {}
        if flavor_link:
            flavor_id = str(flavor.get("id", ""))
            return {"id": flavor_id, "links": [{"rel": "bookmark", "href": flavor_href + quoted(flavor_id)}]}
        return {
            "vcpus": flavor.get("vcpus", 0),
            "ram": flavor.get("ram", 0),
            "disk": flavor.get("disk", 0),
            "ephemeral": flavor.get("ephemeral", 0),
            "swap": flavor.get("swap", 0),
            "original_name": flavor.get("name", ""),
            "extra_specs": dict(flavor.get("extra_specs") or {}),
        }

    # The parts a page's rows have in common (an image, a flavor, a host's status) are made once a
    # request and shared by the views that show them: nothing changes a view's parts once it is made.
    images: dict[tuple[str, str | None] | str, dict[str, Any] | str | Fragment] = {}
    flavors: dict[str, dict[str, Any] | Fragment] = {}
    kernels: dict[str | None, dict[str, Any]] = {}  # what 2.3 shows of a server's image, by its text
    host_statuses: dict[str | None, str] = {}

    def view(row: ServerRow, group: str | None = None) -> dict[str, Any]:
        (sid, name, project_id, user_id, flavor_json, image_ref, metadata, zone, description, key_name,
         ports, tags, reservation_id, image_json, user_data_json, launch_index, locked_by, locked_reason,
         access_ip_v4, access_ip_v6, hostname, disk_config, config_drive, vm_state, task_state, power_state,
         status, host, fault, created, updated, launched_at, terminated_at, deleted, host_zone,
         ) = row  # fmt: skip
        if down and host in down and not deleted:
            power_state = PowerState.NOSTATE
        # the image's properties are its own only from 2.98: before, its reference is the key
        image_key = (image_ref, image_json) if image_properties else image_ref
        image = images.get(image_key)
        if image is None:
            image = image_view(image_ref, image_json)
            image = images[image_key] = Fragment(dumps(image)) if listed else image
        flavor = flavors.get(flavor_json)
        if flavor is None:
            flavor = flavor_view(flavor_json)
            flavor = flavors[flavor_json] = Fragment(dumps(flavor)) if listed else flavor
        shown_host = _host_id(project_id, host) if host else ""  # host_id's, kept across requests
        server: dict[str, Any] = {
            "id": sid,
            "name": name,
            "status": status,
            "tenant_id": project_id,
            "user_id": user_id,
            "metadata": {} if metadata == "{}" else decode_json(metadata) or {},
            "hostId": shown_host,
            "image": image,
            "flavor": flavor,
            "created": created,
            "updated": updated,
            "addresses": {} if ports == "[]" else addresses_view(decode_json(ports) or [], extended=extended),
            "accessIPv4": access_ip_v4 or "",
            "accessIPv6": access_ip_v6 or "",
            # a uuid's text is its own quoted form
            "links": Fragment(f'{links_self}{sid}{links_bookmark}{sid}"}}]')
            if listed
            else [
                {"rel": "self", "href": self_href + sid},
                {"rel": "bookmark", "href": bookmark_href + sid},
            ],
            "OS-DCF:diskConfig": disk_config or DISK_CONFIG,
        }
        if status in _PROGRESS_STATUSES:
            server["progress"] = 100 if status == "ACTIVE" else 0
        if extended:
            server["key_name"] = key_name
            server["config_drive"] = "True" if config_drive else ""  # Nova's string field
            server["OS-EXT-AZ:availability_zone"] = (
                zone if zone else ((host_zone or DEFAULT_ZONE) if host else "")  # text columns
            )
            server["OS-EXT-STS:vm_state"] = vm_state
            server["OS-EXT-STS:task_state"] = task_state
            server["OS-EXT-STS:power_state"] = power_state
            server["OS-SRV-USG:launched_at"] = launched_at
            server["OS-SRV-USG:terminated_at"] = terminated_at
            server["os-extended-volumes:volumes_attached"] = []
            if admin:
                server["OS-EXT-SRV-ATTR:host"] = host
                server["OS-EXT-SRV-ATTR:hypervisor_hostname"] = host
                server["OS-EXT-SRV-ATTR:instance_name"] = f"instance-{sid}"  # the libvirt domain's name
                if attributes:
                    kept = kernels.get(image_json)
                    if kept is None:
                        kept = kernels[image_json] = decode_json(image_json) or {}
                    server["OS-EXT-SRV-ATTR:reservation_id"] = reservation_id
                    server["OS-EXT-SRV-ATTR:launch_index"] = launch_index or 0
                    server["OS-EXT-SRV-ATTR:hostname"] = hostname or _hostname_for(name)
                    server["OS-EXT-SRV-ATTR:kernel_id"] = kept.get("kernel_id") or ""
                    server["OS-EXT-SRV-ATTR:ramdisk_id"] = kept.get("ramdisk_id") or ""
                    # guests boot their kernel directly, with no root disk device
                    server["OS-EXT-SRV-ATTR:root_device_name"] = None
                    server["OS-EXT-SRV-ATTR:user_data"] = (
                        user_data(decode_json(user_data_json)) if user_data is not None else None
                    )
            elif hostname_shown:
                server["OS-EXT-SRV-ATTR:hostname"] = hostname or _hostname_for(name)
            if host_status:
                shown_status = host_statuses.get(host)
                if shown_status is None:
                    shown_status = host_statuses[host] = status_of(host) if status_of is not None else ""
                server["host_status"] = shown_status
        if minor >= 9:
            server["locked"] = locked_by is not None
        if minor >= 19:
            server["description"] = description
        if minor >= 26:
            server["tags"] = [] if tags == "[]" else list(decode_json(tags) or [])
        if minor >= 63:
            server["trusted_image_certificates"] = None  # Stratus verifies no image signatures
        if minor >= 71 and single:
            server["server_groups"] = [group] if group else []
        if minor >= 73:
            server["locked_reason"] = locked_reason
        if minor >= 96:
            server["pinned_availability_zone"] = zone or None
        if minor >= 100:
            server["scheduler_hints"] = {"group": group} if group else {}
        if fault is not None and status in _FAULT_STATUSES:
            shown = decode_json(fault)
            if shown:
                server["fault"] = fault_view(shown, updated, admin)
        return server

    return view


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
                # the page's hosts all at once, the first time one is asked about (a call a host
                # before: most of an admin's page's CPU from 2.16)
                self._up.update(self._alive([h for h in self._services if h not in self._up]))
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
        address: dict[str, Any] = (
            {
                "addr": port["address"],
                "version": 4,
                "OS-EXT-IPS:type": "fixed",
                "OS-EXT-IPS-MAC:mac_addr": port["mac"],
            }
            if extended
            else {"addr": port["address"], "version": 4}
        )
        addresses.setdefault(port["network_name"], []).append(address)
    return addresses


def fault_view(fault: dict[str, Any], updated: str, admin: bool) -> dict[str, Any]:
    """Nova's fault: an HTTP-like code (500 for a failed build), details only for admins at 500;
    created when it says, else when the server was last ``updated`` (``isotime``)."""
    code = fault.get("code")
    status_code = code if isinstance(code, int) else 500
    view: dict[str, Any] = {
        "code": status_code,
        "message": fault.get("message", ""),
        "created": _fault_time(fault.get("created")) or updated,
    }
    details = fault.get("details")
    if details and (admin or status_code != 500):
        view["details"] = details
    return view


def _fault_time(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return isotime(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None
