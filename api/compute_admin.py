"""Routes of the operator-facing Compute API beyond servers: flavor extra specs and access,
services, availability zones and host aggregates, server groups, quotas and limits, tenant usage,
migrations and server diagnostics. ``add_routes`` is called by ``api.app.create_app``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon

from api import (
    audit_log,
    diagnostics,
    flavor_extras,
    hosts,
    migrations,
    quotas,
    server_groups,
    services,
    usage,
    zones,
)
from api.body import load_validators
from api.readmodel import ReadModel
from commands.bus import MessageBus

REQUEST_SCHEMAS = (
    "hosts.update",
    "flavors.extra_specs.create",
    "flavors.extra_specs.update",
    "flavors.action",
    "services.enable",
    "services.disable_log_reason",
    "services.force_down",
    "services.update",
    "aggregates.create",
    "aggregates.update",
    "aggregates.action",
    "aggregates.images",
    "server_groups.create",
    "quota_sets.update",
    "quota_class_sets.update",
)


def add_routes(
    app: falcon.App,
    bus: MessageBus,
    read: ReadModel,
    max_body_bytes: int,
    liveness: Callable[[list[str]], dict[str, bool]] | None = None,
    schedulers: Callable[[], list[dict[str, Any]]] | None = None,
) -> None:
    """``liveness``: which hosts send heartbeats (``stratus.liveness``), for services' ``state``;
    ``schedulers``: the schedulers that beat, for their rows."""
    validators = load_validators(REQUEST_SCHEMAS)
    args = (bus, read, validators, max_body_bytes)
    v = "/v2.1"
    app.add_route(f"{v}/flavors/{{flavor_id}}/os-extra_specs", flavor_extras.ExtraSpecs(*args))
    app.add_route(f"{v}/flavors/{{flavor_id}}/os-extra_specs/{{key}}", flavor_extras.ExtraSpec(*args))
    app.add_route(f"{v}/flavors/{{flavor_id}}/os-flavor-access", flavor_extras.FlavorAccess(*args))
    app.add_route(f"{v}/flavors/{{flavor_id}}/action", flavor_extras.FlavorAction(*args))
    app.add_route(f"{v}/os-services", services.Services(read, liveness=liveness, schedulers=schedulers))
    service = services.ServiceAction(bus, validators, max_body_bytes, read, liveness=liveness)
    app.add_route(f"{v}/os-services/{{action}}", service)
    app.add_route(f"{v}/os-availability-zone", zones.AvailabilityZones(read, detail=False, liveness=liveness))
    app.add_route(
        f"{v}/os-availability-zone/detail", zones.AvailabilityZones(read, detail=True, liveness=liveness)
    )
    app.add_route(f"{v}/os-aggregates", zones.Aggregates(*args))
    app.add_route(f"{v}/os-aggregates/{{aggregate_id}}", zones.Aggregate(*args))
    app.add_route(f"{v}/os-aggregates/{{aggregate_id}}/action", zones.AggregateAction(*args))
    app.add_route(f"{v}/os-aggregates/{{aggregate_id}}/images", zones.AggregateImages(*args))
    app.add_route(f"{v}/os-server-groups", server_groups.ServerGroups(*args))
    app.add_route(f"{v}/os-server-groups/{{group_id}}", server_groups.ServerGroup(*args))
    app.add_route(f"{v}/os-quota-sets/{{project_id}}", quotas.QuotaSet(*args))
    app.add_route(f"{v}/os-quota-sets/{{project_id}}/detail", quotas.QuotaSetDetail(*args))
    app.add_route(f"{v}/os-quota-sets/{{project_id}}/defaults", quotas.QuotaSetDefaults(*args))
    app.add_route(f"{v}/os-quota-class-sets/{{class_id}}", quotas.QuotaClassSet(*args))
    app.add_route(f"{v}/limits", quotas.Limits(*args))
    app.add_route(f"{v}/os-floating-ip-pools", FloatingIpPools())
    app.add_route(f"{v}/os-hosts", hosts.Hosts(read))
    app.add_route(f"{v}/os-instance_usage_audit_log", audit_log.AuditLogs(read))
    app.add_route(f"{v}/os-instance_usage_audit_log/{{before}}", audit_log.AuditLog(read))
    host = hosts.Host(read, bus, validators["hosts.update"], max_body_bytes)
    app.add_route(f"{v}/os-hosts/{{host_name}}", host)
    app.add_route(f"{v}/os-hosts/{{host_name}}/{{action}}", hosts.HostPowerAction(read))
    app.add_route(f"{v}/os-simple-tenant-usage", usage.TenantUsages(read))
    app.add_route(f"{v}/os-simple-tenant-usage/{{tenant_id}}", usage.TenantUsage(read))
    app.add_route(f"{v}/os-migrations", migrations.Migrations(read))
    app.add_route(f"{v}/servers/{{server_id}}/diagnostics", diagnostics.Diagnostics(read))


class FloatingIpPools:
    """``GET /v2.1/os-floating-ip-pools``: none. Nova proxies this to Neutron; Stratus has no
    floating IPs (and no Neutron), and answers as Nova does when no network offers a pool."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"floating_ip_pools": []}
