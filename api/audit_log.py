"""``/v2.1/os-instance_usage_audit_log[/{before}]``: Nova's instance usage audit, served from the log.

Nova runs a periodic task on every host that counts the instances which existed there during the
last completed audit period (a month: from the first of the previous month to the first of this
one) and records a task log per host; the API reports which hosts ran it. Stratus needs no task:
every instance's life is on the log, so every host's audit of any past period is complete, and the
counts come from the read models the log builds (instances on a host that were launched before the
period ended and not deleted before it began). Admin only, as Nova's policy.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import unquote

import falcon

from api import auth
from api.errors import BadRequest
from api.readmodel import ReadModel
from projections import admin_queries

_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f")


def last_completed_period(before: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """Nova's monthly audit period (``utils.last_completed_audit_period``): the month before the
    one ``before`` falls in."""
    end = before.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    begin = (end - dt.timedelta(days=1)).replace(day=1)
    return begin, end


def _parse(text: str) -> dt.datetime:
    for fmt in _FORMATS:
        try:
            return dt.datetime.strptime(text, fmt).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
    raise BadRequest(f"Invalid timestamp for date {text[:64]}")


def _fmt(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


class _AuditLog:
    def __init__(self, read: ReadModel, now: Any = None) -> None:
        self._read = read
        self._now = now or (lambda: dt.datetime.now(dt.UTC))

    def _report(self, req: falcon.Request, before: dt.datetime) -> dict[str, Any]:
        auth.require_admin(req.context.actor, "os_compute_api:os-instance-usage-audit-log:list")
        begin, end = last_completed_period(before)
        with self._read.connection(req) as conn:
            hosts = [h["hostname"] for h in admin_queries.list_compute_services(conn)]
            counts = admin_queries.instances_per_host_in(conn, begin, end)
        log = {
            host: {
                "state": "DONE",
                "instances": counts.get(host, 0),
                "errors": 0,
                "message": f"Instance usage audit ran for host {host}, {counts.get(host, 0)} instances.",
            }
            for host in hosts
        }
        return {
            "hosts_not_run": [],
            "log": log,
            "num_hosts": len(hosts),
            "num_hosts_done": len(hosts),
            "num_hosts_not_run": 0,
            "num_hosts_running": 0,
            "overall_status": "ALL hosts done. 0 errors.",
            "period_beginning": _fmt(begin),
            "period_ending": _fmt(end),
            "total_errors": 0,
            "total_instances": sum(counts.get(h, 0) for h in hosts),
        }


class AuditLogs(_AuditLog):
    """``GET /v2.1/os-instance_usage_audit_log``: Nova's report of the last completed audit period."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"instance_usage_audit_logs": self._report(req, self._now())}


class AuditLog(_AuditLog):
    """``GET /v2.1/os-instance_usage_audit_log/{before}``: the report of the period before that time."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, before: str) -> None:
        resp.media = {"instance_usage_audit_log": self._report(req, _parse(unquote(before)))}
