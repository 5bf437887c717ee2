"""Microversion 2.102: every Compute API refuses a query parameter it does not know (400).

Before 2.102 Nova ignored unknown parameters on most routes (the list routes refused them earlier:
servers at 2.75, flavors at 2.75, migrations at 2.59, each checked in its own module). From 2.102
this table is the whole contract: a route's known parameters by its URI template; a route not named
here takes none. ``min_position`` is Stratus's own, taken everywhere (``api/readmodel.py``).
"""

from __future__ import annotations

import falcon

from api.errors import BadRequest
from api.readmodel import MIN_POSITION_PARAM
from api.versions import at_least

FROM_MINOR = 102
_PAGING = ("limit", "marker")
KNOWN: dict[str, frozenset[str]] = {
    "/v2.1/flavors": frozenset(("is_public", "minRam", "minDisk", "sort_key", "sort_dir", "name", *_PAGING)),
    "/v2.1/flavors/detail": frozenset(
        ("is_public", "minRam", "minDisk", "sort_key", "sort_dir", "name", *_PAGING)
    ),
    "/v2.1/os-keypairs": frozenset(("user_id", *_PAGING)),
    "/v2.1/os-keypairs/{name}": frozenset(("user_id",)),
    "/v2.1/os-hypervisors": frozenset(("hypervisor_hostname_pattern", "with_servers", *_PAGING)),
    "/v2.1/os-hypervisors/detail": frozenset(("hypervisor_hostname_pattern", "with_servers", *_PAGING)),
    "/v2.1/os-hypervisors/{hypervisor_id}": frozenset(("with_servers",)),
    "/v2.1/os-services": frozenset(("binary", "host")),
    "/v2.1/os-migrations": frozenset(
        (
            "status",
            "host",
            "instance_uuid",
            "migration_type",
            "source_compute",
            "hidden",
            "changes-since",
            "changes-before",
            "user_id",
            "project_id",
            *_PAGING,
        )
    ),
    "/v2.1/servers/{server_id}/os-instance-actions": frozenset(("changes-since", "changes-before", *_PAGING)),
    "/v2.1/os-simple-tenant-usage": frozenset(("start", "end", "detailed", *_PAGING)),
    "/v2.1/os-simple-tenant-usage/{tenant_id}": frozenset(("start", "end", *_PAGING)),
    "/v2.1/limits": frozenset(("tenant_id", "reserved")),
    "/v2.1/os-quota-sets/{project_id}": frozenset(("user_id",)),
    "/v2.1/os-quota-sets/{project_id}/detail": frozenset(("user_id",)),
    "/v2.1/os-server-groups": frozenset(("all_projects", "limit", "offset")),
    "/v2.1/os-availability-zone": frozenset(),
    "/v2.1/os-aggregates": frozenset(),
}


def check(req: falcon.Request) -> None:
    """400 for a query parameter the route does not know, from 2.102 (routes with their own list of
    known parameters, servers' among them, check them there)."""
    if not at_least(req, FROM_MINOR):
        return
    template = req.uri_template or ""
    if template in ("/v2.1/servers", "/v2.1/servers/detail"):
        return  # api/servers.py: Nova's own list, refused from 2.75
    known = KNOWN.get(template, frozenset())
    unknown = sorted(set(req.params) - known - {MIN_POSITION_PARAM})
    if unknown:
        raise BadRequest(
            f"Invalid input for query parameters {unknown[0][:64]}. Additional properties are not allowed."
        )
