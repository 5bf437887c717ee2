"""What a server list request asks: Nova's query parameters per microversion (unknown ones refused
from 2.75, joined-table filters always), the filters a member may use (widened at 2.83), the sort
keys, and the filters as ``projections.queries.list_servers`` takes them.
"""

from __future__ import annotations

from typing import Any

import falcon

from api.errors import BadRequest, Forbidden
from api.links import id_from_ref, time_param
from api.versions import at_least
from projections import queries

TRUE = ("1", "true", "t", "yes", "y", "on")
FALSE = ("0", "false", "f", "no", "n", "off")


# Nova's list query parameters (its ``index_query``), by the microversion that added them; unknown
# ones are ignored before 2.75 and refused from it.
_LIST_PARAMS: dict[int, frozenset[str]] = {
    1: frozenset((
        "user_id", "project_id", "tenant_id", "launch_index", "image_ref", "image", "kernel_id", "ramdisk_id",
        "hostname", "key_name", "power_state", "vm_state", "task_state", "host", "node", "flavor",
        "reservation_id", "launched_at", "terminated_at", "availability_zone", "name", "display_name",
        "description", "display_description", "locked_by", "uuid", "root_device_name", "config_drive",
        "access_ip_v4", "access_ip_v6", "auto_disk_config", "progress", "sort_key", "sort_dir", "all_tenants",
        "soft_deleted", "deleted", "status", "changes-since", "ip", "ip6", "created_at", "limit", "marker",
        "block_device_mapping", "services", "metadata", "system_metadata", "info_cache", "security_groups",
        "pci_devices",
    )),
    26: frozenset(("tags", "tags-any", "not-tags", "not-tags-any")),
    66: frozenset(("changes-before",)),
    73: frozenset(("locked",)),
}  # fmt: skip
# Filters on joined tables: Nova refuses them (400) at every version.
_JOINED = ("block_device_mapping", "services", "metadata", "system_metadata", "info_cache", "security_groups",
           "pci_devices")  # fmt: skip
# What a member may filter on (Nova removes the others for non-admins); from 2.83 also these.
_MEMBER_FILTERS = frozenset((
    "reservation_id", "name", "display_name", "status", "image", "image_ref", "flavor", "ip", "changes-since",
    "changes-before", "ip6", "tags", "tags-any", "not-tags", "not-tags-any", "locked", "all_tenants",
))  # fmt: skip
_MEMBER_FILTERS_283 = frozenset((
    "availability_zone", "config_drive", "key_name", "created_at", "launched_at", "terminated_at",
    "power_state", "task_state", "vm_state", "progress", "user_id",
))  # fmt: skip


def check_params(req: falcon.Request) -> None:
    joined = [p for p in _JOINED if p in req.params]
    if joined:
        raise BadRequest(f"Invalid filter field: {joined[0]}.")
    if not at_least(req, 75):
        return
    known = set().union(*(names for minor, names in _LIST_PARAMS.items() if at_least(req, minor)))
    unknown = sorted(set(req.params) - known)
    if unknown:
        raise BadRequest(
            f"Invalid input for query parameters {unknown[0][:64]}. Additional properties are not allowed."
        )


# Sort keys Nova ignores rather than refuse (its SERVER_LIST_IGNORE_SORT_KEY); locked counts from 2.73.
_IGNORED_SORT_KEYS = frozenset((
    "architecture", "cell_name", "cleaned", "default_ephemeral_device", "default_swap_device", "deleted",
    "deleted_at", "disable_terminate", "ephemeral_gb", "ephemeral_key_uuid", "id", "key_data", "launched_on",
    "memory_mb", "os_type", "reservation_id", "root_gb", "shutdown_terminate", "user_data", "vcpus",
    "vm_mode",
))  # fmt: skip


def _sort(req: falcon.Request, admin: bool) -> list[tuple[str, bool]]:
    """Nova's ``sort_key``/``sort_dir`` pairs (repeatable; a key without a direction sorts
    descending); ``host`` and ``node`` are admins' keys (403), an unknown key a 400."""
    keys = req.get_param_as_list("sort_key") or []
    dirs = [d.lower() for d in req.get_param_as_list("sort_dir") or []]
    sort: list[tuple[str, bool]] = []
    for i, key in enumerate(keys):
        direction = dirs[i] if i < len(dirs) else "desc"
        if direction not in ("asc", "desc"):
            raise BadRequest(f"Invalid input for query parameters sort_dir. Value: {direction[:16]}.")
        if key in _IGNORED_SORT_KEYS or (key == "locked" and not at_least(req, 73)):
            continue
        if key not in queries.SORT_KEYS:
            raise BadRequest(f"Invalid input for query parameters sort_key. Value: {key[:64]}.")
        if key in ("host", "node") and not admin:
            raise Forbidden(f"Only administrators can sort servers by {key}")
        sort.append((key, direction == "desc"))
    return sort


def column_filters(req: falcon.Request, admin: bool) -> dict[str, Any]:
    """Nova's filters on a server's columns, as far as the caller may use them (Nova drops the
    others for members: before 2.83 nearly all of them)."""
    allowed = None if admin else _MEMBER_FILTERS | (_MEMBER_FILTERS_283 if at_least(req, 83) else frozenset())
    given = {k: v for k, v in req.params.items() if isinstance(v, str)}
    equal = {k: given[k] for k in queries.LIST_EQUAL if k in given}
    matching = {k: given[k] for k in queries.LIST_MATCHING if k in given}
    if "display_description" in given and "description" not in matching:
        matching["description"] = given["display_description"]
    if allowed is not None:
        equal = {k: v for k, v in equal.items() if k in allowed}
        matching = {k: v for k, v in matching.items() if k in allowed}
    if "power_state" in matching and not matching["power_state"].isdigit():
        names = {"nostate": 0, "running": 1, "paused": 3, "shutdown": 4, "crashed": 6, "suspended": 7}
        matching["power_state"] = str(names.get(matching["power_state"].lower(), -1))
    filters: dict[str, Any] = {"equal": equal, "matching": matching, "sort": _sort(req, admin)}
    before = time_param(req, "changes-before") if at_least(req, 66) else None
    if before is not None:
        filters["changes_before"] = before
    return filters


def field_filters(req: falcon.Request) -> dict[str, Any]:
    """Nova's list filters on a server's own fields: ``changes-since``, ``tags``, ``ip``, reservations."""
    filters: dict[str, Any] = {}
    since = time_param(req, "changes-since")
    if since is not None:
        filters["changes_since"] = since
    for param, key in (
        ("tags", "tags"),
        ("tags-any", "tags_any"),
        ("not-tags", "not_tags"),
        ("not-tags-any", "not_tags_any"),
    ):
        value = req.get_param(param)
        if value:
            filters[key] = [t for t in value.split(",") if t]
    ip = req.get_param("ip")
    if ip:
        filters["ip"] = ip
    reservation = req.get_param("reservation_id")
    if reservation:
        filters["reservation_id"] = reservation
    for param in ("flavor", "image"):  # Nova takes an id or a link ending in it
        value = req.get_param(param) or (req.get_param("image_ref") if param == "image" else None)
        if value:
            filters[param] = id_from_ref(value)
    locked = req.get_param("locked")
    if locked is not None and at_least(req, 73):
        if locked.strip().lower() not in (*TRUE, *FALSE):
            raise BadRequest(f"Invalid input for query parameters locked. Value: {locked[:16]}.")
        filters["locked"] = locked.strip().lower() in TRUE
    return filters
