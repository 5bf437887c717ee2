"""Keystone's views of the identity resources: the body each one has in answers, with its links."""

from __future__ import annotations

import datetime as dt
from typing import Any

import falcon

from api.identity.common import Row, domain_ref, url
from api.identity.tokens import TokenClaims, isoformat
from projections import identity_queries as q


def _member(
    req: falcon.Request, row: Row, path: tuple[str, ...], columns: tuple[str, ...], **fields: Any
) -> dict[str, Any]:
    """One resource's body: the ``columns`` of its row as they are, then ``fields``, then its link
    (``path`` then its id), in that order (as Keystone's ``wrap_member`` adds ``links`` to a row)."""
    body: dict[str, Any] = {column: row[column] for column in columns}
    return {**body, **fields, "links": {"self": url(req, *path, row["id"])}}


def project_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    return _member(
        req,
        row,
        ("projects",),
        ("id", "name", "domain_id", "description", "enabled"),
        is_domain=False,
        parent_id=row["domain_id"],
        tags=[],
        options={},
    )


def user_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    user = _member(
        req, row, ("users",), ("id", "name", "domain_id", "enabled"), password_expires_at=None, options={}
    )
    for optional in ("default_project_id", "email", "description"):
        if row.get(optional) is not None:
            user[optional] = row[optional]
    return {**(row.get("extra") or {}), **user}  # Keystone's extra attributes, never over its own


def role_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    return _member(
        req, row, ("roles",), ("id", "name"), domain_id=None, description=row["description"], options={}
    )


def domain_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    return _member(req, row, ("domains",), ("id", "name", "description", "enabled"), tags=[], options={})


def group_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    return _member(req, row, ("groups",), ("id", "name", "domain_id", "description"))


def token_view(
    req: falcon.Request,
    claims: TokenClaims,
    subject: q.Subject,
    roles: list[dict[str, Any]],
    services: list[dict[str, Any]] | None,
    domains: dict[str, dict[str, Any]],
    credential: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Keystone's token body; ``services``: the catalog (None: asked for none); ``domains``: the
    user's and project's domains by id; ``credential``: the application credential it was issued for."""
    user, project = subject.user, subject.project
    token: dict[str, Any] = {
        "methods": list(claims.methods),
        "user": {
            "id": user["id"],
            "name": user["name"],
            "domain": domain_ref(user["domain_id"], domains),
            "password_expires_at": None,
        },
        "audit_ids": claims.audit_ids,
        "issued_at": isoformat(claims.issued_at),
        "expires_at": isoformat(claims.expires_at),
        "roles": roles,
    }
    if claims.project_id:
        token["project"] = {
            "id": project["id"],
            "name": project["name"],
            "domain": domain_ref(project["domain_id"], domains),
        }
        token["is_domain"] = False
    else:
        token["system"] = {"all": True}
    if credential is not None:
        token["application_credential"] = {
            "id": credential["id"],
            "name": credential["name"],
            "restricted": not credential["unrestricted"],
        }
    if services is not None:
        token["catalog"] = services
    return {"token": token}


def _expiry(value: Any) -> str | None:
    """``expires_at`` as Keystone shows it (``2026-01-01T00:00:00.000000``, UTC), or None."""
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return str(value.strftime("%Y-%m-%dT%H:%M:%S.%f"))


def application_credential_view(req: falcon.Request, row: Row, roles: dict[str, Row]) -> dict[str, Any]:
    return _member(
        req,
        row,
        ("users", row["user_id"], "application_credentials"),
        ("id", "name", "description", "project_id"),
        expires_at=_expiry(row["expires_at"]),
        unrestricted=row["unrestricted"],
        roles=[{"id": r, "name": roles[r]["name"], "domain_id": None} for r in row["role_ids"] if r in roles],
        access_rules=row["access_rules"],
    )


def access_rule_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    return _member(req, row, ("users", row["user_id"], "access_rules"), ("id", "service", "path", "method"))


def endpoint_url(req: falcon.Request, value: str) -> str:
    """An endpoint's URL; a path (the seeded endpoints') is completed with the address the client called."""
    return f"{req.prefix}{value}" if value.startswith("/") else value


def region_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    return _member(req, row, ("regions",), ("id", "description", "parent_region_id"))


def service_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    return _member(req, row, ("services",), ("id", "type", "name", "description", "enabled"))


def endpoint_view(req: falcon.Request, row: Row) -> dict[str, Any]:
    return _member(
        req,
        row,
        ("endpoints",),
        ("id", "service_id", "interface"),
        url=endpoint_url(req, row["url"]),
        region=row["region_id"],
        region_id=row["region_id"],
        enabled=row["enabled"],
    )
