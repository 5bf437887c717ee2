"""``/identity/v3/users/{u}/application_credentials`` and ``/access_rules``, and authenticating with
an application credential.

A credential lets a program act as its user in one project, with some of the user's roles there,
until it expires or is deleted. Its secret is shown once, in the answer to its creation; only its
argon2id hash is kept (``api/identity/credentials.py``), never in an event or a log line. Only the user
may make credentials (as Keystone's policy has it); a token from a restricted credential may not
make more. Access rules are recorded and listed; Stratus does not yet enforce them on requests.
"""

from __future__ import annotations

import datetime as dt
import secrets
import uuid
from typing import Any

import falcon

from api.errors import BadRequest, Forbidden, ItemNotFound, Unauthorized
from api.identity.common import AUTH_FAILED, Resource, Row, collection
from api.identity.credentials import Credentials
from api.identity.tokens import TokenClaims
from api.identity.views import access_rule_view, application_credential_view
from api.readmodel import ReadModel
from commands.identity_catalog import seeded_id
from commands.keystone.application_credentials import (
    CreateApplicationCredential,
    DeleteAccessRule,
    DeleteApplicationCredential,
)
from projections import directory_queries as dq
from projections import identity_queries as q
from stratus.context import acting

SCHEMAS = ("identity.application_credentials.create",)


def _given_expiry(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest("Invalid input for field 'expires_at': an ISO 8601 time.") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    if when <= dt.datetime.now(dt.UTC):
        raise BadRequest("Invalid input for field 'expires_at': it has passed.")
    return when.isoformat()


# -- authenticating -------------------------------------------------------------------------------
def authenticate(
    read: ReadModel, credentials: Credentials, req: falcon.Request, identity: dict[str, Any]
) -> tuple[Row, Row]:
    """The credential named in ``identity`` (by id, or by name and user) and its user, once its
    secret is checked; 401, saying no more, for anything wrong."""
    spec = identity.get("application_credential")
    if not spec:
        raise BadRequest(
            "Invalid input for field 'identity': "
            "the application_credential method needs 'application_credential'."
        )
    with read.connection(req) as conn:
        row = _named_credential(conn, spec)
        user = q.get_user(conn, row["user_id"]) if row is not None else None
    who = f"appcred:{row['id'] if row else spec.get('id') or spec.get('name')}"
    source = req.remote_addr or "-"
    throttle = credentials.throttle
    if throttle.retry_after(who, source):
        raise Unauthorized(AUTH_FAILED)
    if row is None or user is None or not credentials.check_secret(row["id"], spec["secret"]):
        if row is None:
            credentials.check_secret("", spec["secret"])
        throttle.failed(who, source)
        raise Unauthorized(AUTH_FAILED)
    if row["expires_at"] is not None and row["expires_at"] <= dt.datetime.now(dt.UTC):
        raise Unauthorized(AUTH_FAILED)
    throttle.succeeded(who)
    return row, user


def _named_credential(conn: Any, spec: dict[str, Any]) -> Row | None:
    if "id" in spec:
        return dq.get_application_credential(conn, spec["id"])
    given = spec.get("user") or {}
    if "name" not in spec or not given:
        raise BadRequest(
            "Invalid input for field 'application_credential': give its 'id', or its 'name' and 'user'."
        )
    if "id" in given:
        user = q.get_user(conn, given["id"])
    else:
        domain = given.get("domain") or {}
        domain_row = (
            dq.get_domain(conn, domain["id"])
            if "id" in domain
            else dq.domain_by_name(conn, domain.get("name", ""))
        )
        user = q.user_by_name(conn, given.get("name", ""), domain_row["id"]) if domain_row else None
    if user is None:
        return None
    rows = dq.list_application_credentials(conn, user["id"], name=spec["name"])
    return rows[0] if rows else None


def scope(conn: Any, credential: Row, wanted: dict[str, Any] | None) -> Row:
    """The credential's project: a token of it names no other (Keystone: 401)."""
    project = q.get_project(conn, credential["project_id"])
    asked = (wanted or {}).get("project", {}).get("id")
    if project is None or (wanted is not None and asked != project["id"]):
        raise Unauthorized(AUTH_FAILED)
    return project


def restricted(conn: Any, credential: Row, role_names: frozenset[str]) -> frozenset[str]:
    """Of the roles the user holds in the project now, those the credential was given."""
    names = {r["id"]: r["name"] for r in q.list_roles(conn)}
    return q.restricted(role_names, [names[r] for r in credential["role_ids"] if r in names])


def of_token(conn: Any, claims: TokenClaims) -> Row | None:
    if not claims.application_credential_id:
        return None
    return dq.get_application_credential(conn, claims.application_credential_id)


# -- the API --------------------------------------------------------------------------------------
class ApplicationCredentials(Resource):
    """``GET``/``POST /identity/v3/users/{u}/application_credentials``: list and create."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        self._themself_or(req, user_id, "identity:list_application_credentials")
        with self._read.connection(req) as conn:
            self._user(conn, user_id)
            rows = dq.list_application_credentials(conn, user_id, name=req.get_param("name"))
            roles = {r["id"]: r for r in q.list_roles(conn)}
        resp.media = collection(
            req, "application_credentials", [application_credential_view(req, r, roles) for r in rows]
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        auth = req.context.auth
        if auth.claims.user_id != user_id:
            raise Forbidden("Policy doesn't allow identity:create_application_credential to be performed.")
        spec = self._body(req, "identity.application_credentials.create")["application_credential"]
        project_id = auth.claims.project_id
        with self._read.connection(req) as conn:
            self._refuse_restricted(conn, auth.claims)
            role_ids = self._roles(conn, spec.get("roles"), auth.actor.roles)
            rules = self._rules(conn, user_id, spec.get("access_rules") or [])
        secret = spec.get("secret") or secrets.token_urlsafe(64)
        credential_id = uuid.uuid4().hex
        cmd = CreateApplicationCredential(
            user_id,
            project_id,
            spec["name"],
            role_ids,
            description=spec.get("description"),
            expires_at=_given_expiry(spec.get("expires_at")),
            unrestricted=bool(spec.get("unrestricted")),
            access_rules=rules,
            application_credential_id=credential_id,
        )
        with acting(req.context.command), self._credentials.secret_setting(credential_id, secret):
            result = self._bus.handle(cmd)

        def fetch(conn: Any) -> tuple[Row, dict[str, Row]]:
            row = self._found(
                dq.get_application_credential(conn, credential_id), "application credential", credential_id
            )
            return row, {r["id"]: r for r in q.list_roles(conn)}

        row, roles = self._after(req, result.position, fetch)
        resp.status = falcon.HTTP_201
        resp.media = {
            "application_credential": {**application_credential_view(req, row, roles), "secret": secret}
        }

    @staticmethod
    def _refuse_restricted(conn: Any, claims: TokenClaims) -> None:
        credential = of_token(conn, claims)
        if credential is not None and not credential["unrestricted"]:
            raise Forbidden("A restricted application credential cannot make application credentials.")

    @staticmethod
    def _roles(conn: Any, given: list[dict[str, str]] | None, held: tuple[str, ...]) -> tuple[str, ...]:
        """The roles' ids: those named, each one the caller holds; by default all the caller holds."""
        roles = q.list_roles(conn)
        by_id = {r["id"]: r for r in roles}
        by_name = {r["name"]: r for r in roles}
        if not given:
            return tuple(by_name[n]["id"] for n in held if n in by_name)
        ids = []
        for ref in given:
            role = by_id.get(ref.get("id", "")) or by_name.get(ref.get("name", ""))
            if role is None:
                raise ItemNotFound(f"Could not find role: {ref.get('id') or ref.get('name')}.")
            if role["name"] not in held:
                raise Forbidden(f"You do not hold the role {role['name']} in this project.")
            ids.append(role["id"])
        return tuple(dict.fromkeys(ids))

    @staticmethod
    def _rules(conn: Any, user_id: str, given: list[dict[str, str]]) -> tuple[dict[str, str], ...]:
        """Each rule whole, with its id: a rule named by id is the user's; a new one gets an id
        derived from its content, so the same rule given twice is one rule (as Keystone keeps it)."""
        rules = []
        for rule in given:
            if set(rule) == {"id"}:
                found = dq.list_access_rules(conn, user_id, rule["id"])
                if not found:
                    raise ItemNotFound(f"Could not find access rule: {rule['id']}.")
                rule = {k: found[0][k] for k in ("id", "service", "path", "method")}
            elif not {"service", "path", "method"} <= set(rule):
                raise BadRequest(
                    "Invalid input for field 'access_rules': each needs service, path and method."
                )
            rule_id = rule.get("id") or seeded_id(
                "access_rule", user_id, rule["service"], rule["path"], rule["method"]
            )
            rules.append(
                {"id": rule_id, "service": rule["service"], "path": rule["path"], "method": rule["method"]}
            )
        return tuple(rules)


class ApplicationCredentialItem(Resource):
    """``GET``/``DELETE /identity/v3/users/{u}/application_credentials/{id}``."""

    def _row(self, conn: Any, user_id: str, credential_id: str) -> Row:
        row = dq.get_application_credential(conn, credential_id)
        if row is None or row["user_id"] != user_id:
            raise ItemNotFound(f"Could not find application credential: {credential_id}.")
        return row

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str, credential_id: str) -> None:
        self._themself_or(req, user_id, "identity:get_application_credential")
        with self._read.connection(req) as conn:
            row = self._row(conn, user_id, credential_id)
            roles = {r["id"]: r for r in q.list_roles(conn)}
        resp.media = {"application_credential": application_credential_view(req, row, roles)}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str, credential_id: str) -> None:
        self._themself_or(req, user_id, "identity:delete_application_credential")
        with self._read.connection(req) as conn:
            self._row(conn, user_id, credential_id)
            ApplicationCredentials._refuse_restricted(conn, req.context.auth.claims)
        result = self._handle(req, DeleteApplicationCredential(credential_id))
        self._credentials.forget_secret(credential_id)
        self._written(req, result.position)
        resp.status = falcon.HTTP_204


class AccessRules(Resource):
    """``GET /identity/v3/users/{u}/access_rules``: the rules the user's credentials named."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        rows = self._theirs(req, user_id, "identity:list_access_rules", dq.list_access_rules)
        resp.media = collection(req, "access_rules", [access_rule_view(req, r) for r in rows])


class AccessRuleItem(Resource):
    """``GET``/``DELETE /identity/v3/users/{u}/access_rules/{id}`` (not while a credential uses it)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str, rule_id: str) -> None:
        self._themself_or(req, user_id, "identity:get_access_rule")
        with self._read.connection(req) as conn:
            rows = dq.list_access_rules(conn, user_id, rule_id)
        if not rows:
            raise ItemNotFound(f"Could not find access rule: {rule_id}.")
        resp.media = {"access_rule": access_rule_view(req, rows[0])}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str, rule_id: str) -> None:
        """Keystone: a rule a credential still uses cannot go (403)."""
        self._themself_or(req, user_id, "identity:delete_access_rule")
        with self._read.connection(req) as conn:
            if not dq.list_access_rules(conn, user_id, rule_id):
                raise ItemNotFound(f"Could not find access rule: {rule_id}.")
            users = dq.list_application_credentials(conn, user_id)
        if any(rule["id"] == rule_id for c in users for rule in c["access_rules"]):
            raise Forbidden(f"Access rule {rule_id} is in use by an application credential.")
        self._handled(req, DeleteAccessRule(user_id, rule_id))
        resp.status = falcon.HTTP_204
