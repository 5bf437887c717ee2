"""``/v2.1/os-quota-sets`` and ``/v2.1/limits``: a project's quota limits (Nova's defaults unless an
admin set others) and what it uses of them, in Nova's 2.1 shapes.

Limits are events on the project's quota aggregate; usage is counted from the read model (servers
not deleted with their flavors' cores and RAM, server groups, the caller's key pairs). A project
member sees their own project's; another project's is a 403, as in Nova.
"""

from __future__ import annotations

from typing import Any

import falcon

from api import auth
from api.body import as_bool, as_int
from api.errors import BadRequest
from api.readmodel import POSITION_HEADER
from api.resource import BusResource
from api.versions import at_least
from commands.quota import DEFAULT_CLASS, DEFAULT_LIMITS
from commands.quotas.limits import ResetQuota, SetQuota, SetQuotaClass, quota_class
from projections import admin_queries
from stratus.context import Actor, acting

# Every project's quota reads wait for the last change of the defaults through this process.
QUOTA_DEFAULTS = "quotas:defaults"


def _may_read(actor: Actor, project_id: str) -> None:
    if project_id != actor.project_id:
        auth.require_admin(actor, "os_compute_api:os-quota-sets:show")


class _Quotas(BusResource):
    def _state(self, req: falcon.Request, project_id: str) -> tuple[dict[str, int], dict[str, int]]:
        """(limits, usage) of ``project_id`` from the read model."""
        actor = req.context.actor
        user_id = req.get_param("user_id") or actor.user_id
        if user_id != actor.user_id:  # another user's usage (their key pairs) is for admins to see
            auth.require_admin(actor, "os_compute_api:os-quota-sets:show")
        with self._read.connection(req, concerning=(QUOTA_DEFAULTS,)) as conn:
            defaults = {**DEFAULT_LIMITS, **admin_queries.quota_class(conn, DEFAULT_CLASS)}
            limits = {**defaults, **admin_queries.quota_overrides(conn, project_id)}
            used = admin_queries.project_usage(conn, project_id, user_id)
        return limits, used

    def _defaults(self, req: falcon.Request, name: str = DEFAULT_CLASS) -> dict[str, int]:
        with self._read.connection(req, concerning=(QUOTA_DEFAULTS,)) as conn:
            return {**DEFAULT_LIMITS, **admin_queries.quota_class(conn, name)}


class QuotaSet(_Quotas):
    """``GET``, ``PUT`` (admin) and ``DELETE`` (admin) ``/v2.1/os-quota-sets/{project_id}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        _may_read(req.context.actor, project_id)
        limits, _ = self._state(req, project_id)
        resp.media = {"quota_set": {"id": project_id, **shown(req, limits)}}

    def on_put(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-quota-sets:update")
        spec = dict(self._body(req, "quota_sets.update")["quota_set"])
        unknown = sorted(set(spec) - set(shown(req, {**DEFAULT_LIMITS, "force": 0})))
        if unknown:
            raise BadRequest(
                f"Invalid input for field/attribute quota_set. Additional properties are not allowed "
                f"({', '.join(map(repr, unknown))} unexpected at this microversion)"
            )
        auth.require_project(self._bus.app, project_id)
        force = as_bool(spec.pop("force", False))
        spec = {k: as_int(v, f"quota_set.{k}", -1) for k, v in spec.items()}
        _, used = self._state(req, project_id)
        with acting(req.context.command):
            result = self._bus.handle(SetQuota(project_id, spec, used, force))
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = {"quota_set": shown(req, dict(self._bus.uow.limits(project_id)))}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-quota-sets:delete")
        with acting(req.context.command):
            result = self._bus.handle(ResetQuota(project_id))
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.status = falcon.HTTP_202


class QuotaSetDetail(_Quotas):
    """``GET /v2.1/os-quota-sets/{project_id}/detail``: each limit with what is in use."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        _may_read(req.context.actor, project_id)
        limits, used = self._state(req, project_id)
        detail: dict[str, Any] = {
            r: {"limit": limit, "in_use": used.get(r, 0), "reserved": 0}
            for r, limit in shown(req, limits).items()
        }
        resp.media = {"quota_set": {"id": project_id, **detail}}


class QuotaSetDefaults(_Quotas):
    """``GET /v2.1/os-quota-sets/{project_id}/defaults``: the default quota class's limits."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        resp.media = {"quota_set": {"id": project_id, **shown(req, self._defaults(req))}}


class QuotaClassSet(_Quotas):
    """``GET`` and ``PUT`` (admin) ``/v2.1/os-quota-class-sets/{id}``. As in Nova, any class name is
    kept, and only ``default``'s limits mean anything: they are every project's defaults."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, class_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-quota-class-sets:show")
        resp.media = {"quota_class_set": {"id": class_id, **class_shown(req, self._defaults(req, class_id))}}

    def on_put(self, req: falcon.Request, resp: falcon.Response, class_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-quota-class-sets:update")
        spec = dict(self._body(req, "quota_class_sets.update")["quota_class_set"])
        unknown = sorted(set(spec) - set(class_shown(req, dict(DEFAULT_LIMITS))))
        if unknown:
            raise BadRequest(
                f"Invalid input for field/attribute quota_class_set. Additional properties are not allowed "
                f"({', '.join(map(repr, unknown))} unexpected at this microversion)"
            )
        limits = {k: as_int(v, f"quota_class_set.{k}", -1) for k, v in spec.items()}
        with acting(req.context.command):
            result = self._bus.handle(SetQuotaClass(class_id, limits))
        self._read.note(QUOTA_DEFAULTS, result.position)
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = {"quota_class_set": class_shown(req, quota_class(self._bus.uow, class_id))}


# What Nova stopped showing, by the microversion that removed it: the proxied network quotas (2.36),
# image metadata (2.39) and injected files (2.57).
_QUOTAS_REMOVED = {
    36: ("fixed_ips", "floating_ips", "security_groups", "security_group_rules", "networks"),
    57: ("injected_files", "injected_file_content_bytes", "injected_file_path_bytes"),
}
_LIMITS_REMOVED = {
    36: (
        "maxSecurityGroupRules", "maxSecurityGroups", "maxTotalFloatingIps",
        "totalFloatingIpsUsed", "totalSecurityGroupsUsed",
    ),
    39: ("maxImageMeta",),
    57: ("maxPersonality", "maxPersonalitySize"),
}  # fmt: skip


Removed = dict[int, tuple[str, ...]]


def _at_version(req: falcon.Request, values: dict[str, int], removed: Removed) -> dict[str, int]:
    gone = {name for minor, names in removed.items() if at_least(req, minor) for name in names}
    return {k: v for k, v in values.items() if k not in gone}


def shown(req: falcon.Request, limits: dict[str, int]) -> dict[str, int]:
    """The quota set as the request's microversion shows it."""
    return _at_version(req, limits, _QUOTAS_REMOVED)


# A quota class set has no server group quotas before 2.50, which also drops the network ones.
_CLASS_REMOVED: Removed = {
    50: _QUOTAS_REMOVED[36],
    57: _QUOTAS_REMOVED[57],
}
_CLASS_ADDED_AT_50 = ("server_groups", "server_group_members")


def class_shown(req: falcon.Request, limits: dict[str, int]) -> dict[str, int]:
    """A quota class set as the request's microversion shows it (its own history: 2.50, 2.57)."""
    values = _at_version(req, limits, _CLASS_REMOVED)
    if not at_least(req, 50):
        values = {k: v for k, v in values.items() if k not in _CLASS_ADDED_AT_50}
    return values


class Limits(_Quotas):
    """``GET /v2.1/limits``: the caller's project's absolute limits and usage (admins: ``tenant_id``)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        project_id = req.get_param("tenant_id") or actor.project_id
        _may_read(actor, project_id)
        limits, used = self._state(req, project_id)
        absolute = {
            "maxImageMeta": limits["metadata_items"],
            "maxPersonality": limits["injected_files"],
            "maxPersonalitySize": limits["injected_file_content_bytes"],
            "maxSecurityGroupRules": limits["security_group_rules"],
            "maxSecurityGroups": limits["security_groups"],
            "maxServerGroupMembers": limits["server_group_members"],
            "maxServerGroups": limits["server_groups"],
            "maxServerMeta": limits["metadata_items"],
            "maxTotalCores": limits["cores"],
            "maxTotalFloatingIps": limits["floating_ips"],
            "maxTotalInstances": limits["instances"],
            "maxTotalKeypairs": limits["key_pairs"],
            "maxTotalRAMSize": limits["ram"],
            "totalCoresUsed": used["cores"],
            "totalFloatingIpsUsed": 0,
            "totalInstancesUsed": used["instances"],
            "totalRAMUsed": used["ram"],
            "totalSecurityGroupsUsed": 0,
            "totalServerGroupsUsed": used["server_groups"],
        }
        resp.media = {"limits": {"rate": [], "absolute": _at_version(req, absolute, _LIMITS_REMOVED)}}
