"""``/identity``: the subset of Keystone's v3 API that the ``openstack`` CLI and openstacksdk need.

Version discovery, password (and token) authentication scoped to a project, token validation and
revocation, projects, users, roles, role grants and role assignments, and the one ``Default``
domain. Writes are identity commands on the event log; reads come from the identity read model.
A write that clients read back at once (a created project, a disabled user, a revoked token)
answers only once the read model has applied it, so the next request sees its effect.

Errors have Keystone's shape (``{"error": {"code", "title", "message"}}``) instead of Nova's:
``KeystoneErrors`` rewrites the faults ``api/errors.py`` produced for paths under ``/identity``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import policy
from api.auth import Authenticated, Authenticator
from api.body import read_json
from api.credentials import Credentials
from api.errors import BadRequest, ItemNotFound, TooManyRequests, Unauthorized
from api.readmodel import ReadModel
from api.tokens import TokenClaims, isoformat
from commands.identity import DEFAULT_DOMAIN_ID, DEFAULT_DOMAIN_NAME, effective_roles
from commands.identity_handlers import (
    CreateProject,
    CreateUser,
    GrantRole,
    IdentityHandlers,
    RevokeRole,
    RevokeToken,
    UpdateProject,
    UpdateUser,
)
from projections import identity_queries as q
from stratus.context import acting

log = logging.getLogger("stratus.api")

PREFIX = "/identity"
V3 = f"{PREFIX}/v3"
SUBJECT_TOKEN_HEADER = "X-Subject-Token"
REGION = "RegionOne"
IDENTITY_SCHEMAS = (
    "identity.auth",
    "identity.projects.create",
    "identity.projects.update",
    "identity.users.create",
    "identity.users.update",
)
_UPDATED = "2024-04-03T00:00:00Z"
_AUTH_FAILED = "The request you have made requires authentication."
_TITLES = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
    429: "Too Many Requests",
}  # fmt: skip


# -- the service catalog ------------------------------------------------------------------------
# (service type, name, path under the API's base URL). Other services add themselves here.
CATALOG: list[tuple[str, str, str]] = [
    ("compute", "nova", "/v2.1"),
    ("identity", "keystone", PREFIX),
    ("image", "glance", "/image"),
    ("placement", "placement", "/placement"),
]


def catalog(base: str) -> list[dict[str, Any]]:
    services = []
    for service_type, name, path in CATALOG:
        endpoints = [
            {
                "id": f"{name}-{interface}",
                "interface": interface,
                "region": REGION,
                "region_id": REGION,
                "url": f"{base}{path}",
            }
            for interface in ("public", "internal", "admin")
        ]
        services.append({"id": name, "type": service_type, "name": name, "endpoints": endpoints})
    return services


# -- views ----------------------------------------------------------------------------------------
def _url(req: falcon.Request, *parts: str) -> str:
    return "/".join([f"{req.prefix}{V3}", *parts])


def _domain_ref(domain_id: str) -> dict[str, str]:
    return {"id": domain_id, "name": DEFAULT_DOMAIN_NAME if domain_id == DEFAULT_DOMAIN_ID else domain_id}


def project_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "domain_id": row["domain_id"],
        "description": row["description"],
        "enabled": row["enabled"],
        "is_domain": False,
        "parent_id": row["domain_id"],
        "tags": [],
        "options": {},
        "links": {"self": _url(req, "projects", row["id"])},
    }


def user_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": row["id"],
        "name": row["name"],
        "domain_id": row["domain_id"],
        "enabled": row["enabled"],
        "password_expires_at": None,
        "options": {},
        "links": {"self": _url(req, "users", row["id"])},
    }
    for optional in ("default_project_id", "email", "description"):
        if row.get(optional) is not None:
            user[optional] = row[optional]
    return user


def role_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "domain_id": None,
        "description": row["description"],
        "options": {},
        "links": {"self": _url(req, "roles", row["id"])},
    }


def _collection(req: falcon.Request, key: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: items, "links": {"self": req.url, "previous": None, "next": None}}


def _default_domain(req: falcon.Request) -> dict[str, Any]:
    return {
        "id": DEFAULT_DOMAIN_ID,
        "name": DEFAULT_DOMAIN_NAME,
        "description": "The default domain",
        "enabled": True,
        "tags": [],
        "options": {},
        "links": {"self": _url(req, "domains", DEFAULT_DOMAIN_ID)},
    }


def token_view(
    req: falcon.Request,
    claims: TokenClaims,
    subject: q.Subject,
    roles: list[dict[str, Any]],
    with_catalog: bool,
) -> dict[str, Any]:
    user, project = subject.user, subject.project
    token: dict[str, Any] = {
        "methods": list(claims.methods),
        "user": {
            "id": user["id"],
            "name": user["name"],
            "domain": _domain_ref(user["domain_id"]),
            "password_expires_at": None,
        },
        "audit_ids": claims.audit_ids,
        "issued_at": isoformat(claims.issued_at),
        "expires_at": isoformat(claims.expires_at),
        "project": {
            "id": project["id"],
            "name": project["name"],
            "domain": _domain_ref(project["domain_id"]),
        },
        "is_domain": False,
        "roles": roles,
    }
    if with_catalog:
        token["catalog"] = catalog(req.prefix)
    return {"token": token}


def _flag(req: falcon.Request, name: str) -> bool | None:
    value = req.get_param(name)
    if value is None:
        return None
    return value.strip().lower() not in ("0", "false", "no", "off", "")


# -- shared plumbing ------------------------------------------------------------------------------
class _Resource:
    def __init__(
        self,
        handlers: IdentityHandlers,
        read: ReadModel,
        validators: dict[str, Draft202012Validator],
        credentials: Credentials,
        authenticator: Authenticator,
        max_body_bytes: int,
    ) -> None:
        self._handlers = handlers
        self._read = read
        self._validators = validators
        self._credentials = credentials
        self._auth = authenticator
        self._max_body = max_body_bytes

    def _body(self, req: falcon.Request, schema: str) -> dict[str, Any]:
        return read_json(req, self._validators[schema], self._max_body)

    def _after(self, req: falcon.Request, position: int, fetch: Callable[[Any], Any]) -> Any:
        """Read with ``fetch`` once the read model has applied ``position`` (the write just made)."""
        req.context.written_position = position  # answered as X-Stratus-Position (api/positions.py)
        with self._read.connection(req, after=position) as conn:
            return fetch(conn)

    def _project(self, conn: Any, project_id: str) -> dict[str, Any]:
        row = q.get_project(conn, project_id)
        if row is None:
            raise ItemNotFound(f"Could not find project: {project_id}.")
        return row

    def _user(self, conn: Any, user_id: str) -> dict[str, Any]:
        row = q.get_user(conn, user_id)
        if row is None:
            raise ItemNotFound(f"Could not find user: {user_id}.")
        return row

    def _role(self, conn: Any, role_id: str) -> dict[str, Any]:
        row = q.get_role(conn, role_id)
        if row is None:
            raise ItemNotFound(f"Could not find role: {role_id}.")
        return row


# -- discovery ------------------------------------------------------------------------------------
def _v3_doc(req: falcon.Request) -> dict[str, Any]:
    return {
        "id": "v3.14",
        "status": "stable",
        "updated": _UPDATED,
        "links": [{"rel": "self", "href": f"{req.prefix}{V3}/"}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    }


class Versions:
    """``GET /identity``: Keystone's version list (300 Multiple Choices, as Keystone answers)."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_300
        resp.media = {"versions": {"values": [_v3_doc(req)]}}


class Version:
    """``GET /identity/v3``."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"version": _v3_doc(req)}


# -- tokens ---------------------------------------------------------------------------------------
class Tokens(_Resource):
    """``/identity/v3/auth/tokens``: issue (POST, no token needed), validate (GET, HEAD), revoke (DELETE)."""

    public = frozenset({"POST"})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth = self._body(req, "identity.auth")["auth"]
        identity = auth["identity"]
        method = identity["methods"][0]
        parent: TokenClaims | None = None
        # The password is checked holding no read-model connection: the check (and the throttle)
        # take their own from the same pool, and concurrent logins must not exhaust it.
        user = self._password_user(req, identity.get("password")) if method == "password" else None
        with self._read.connection(req) as conn:
            if user is None:
                if "token" not in identity:
                    raise BadRequest("Invalid input for field 'identity': the token method needs 'token'.")
                given = self._auth.authenticate(req, identity["token"]["id"])
                parent = given.claims
                user = q.get_user(conn, parent.user_id) or dict(given.subject.user)
            project = self._scope(conn, auth.get("scope"), user, parent)
            if not user["enabled"] or not project["enabled"]:
                raise Unauthorized(_AUTH_FAILED)
            role_names = q.user_role_names(conn, user["id"], project["id"])
            if not role_names:
                raise Unauthorized(_AUTH_FAILED)
            # A token from a token keeps its parent's chain and expiry (never a longer life).
            token, claims = self._auth.signer.issue(
                user["id"], project["id"], (method,), parent=parent
            )
            roles = self._roles(conn, role_names)
        subject = q.Subject(user, project, role_names, revoked=False)
        resp.status = falcon.HTTP_201
        resp.set_header(SUBJECT_TOKEN_HEADER, token)
        resp.media = token_view(req, claims, subject, roles, req.get_param("nocatalog") is None)

    def _password_user(self, req: falcon.Request, password: dict[str, Any] | None) -> dict[str, Any]:
        if not password:
            raise BadRequest("Invalid input for field 'identity': the password method needs 'password'.")
        given = password["user"]
        with self._read.connection(req) as conn:
            if "id" in given:
                user = q.get_user(conn, given["id"])
                who = str(given["id"])
            elif "name" in given and "domain" in given:
                domain_id = self._domain_id(given["domain"])
                user = q.user_by_name(conn, given["name"], domain_id)
                who = f"{domain_id}/{given['name']}"
            else:
                raise BadRequest("Invalid input for field 'user': give its 'id', or its 'name' and 'domain'.")
        # Throttled per user (by id when known, so that its name and id share one count) and per
        # source address, before any password is checked.
        who = user["id"] if user is not None else who
        source = req.remote_addr or "-"
        throttle = self._credentials.throttle
        wait = throttle.retry_after(who, source)
        if wait:
            log.warning("login throttled for user %s from %s for %d s", who, source, wait)
            raise TooManyRequests(
                f"Too many failed logins; retry in {wait} seconds.", headers={"Retry-After": str(wait)}
            )
        # The same failure whatever was wrong: an unknown user and a wrong password look alike.
        if user is None or not self._credentials.check(user["id"], given["password"]):
            if user is None:
                self._credentials.check("", given["password"])
            throttle.failed(who, source)
            log.info("password authentication failed for user %s from %s", who, source)
            raise Unauthorized(_AUTH_FAILED)
        throttle.succeeded(who)
        return user

    @staticmethod
    def _domain_id(domain: dict[str, str]) -> str:
        if domain.get("id", DEFAULT_DOMAIN_ID) == DEFAULT_DOMAIN_ID and domain.get(
            "name", DEFAULT_DOMAIN_NAME
        ) in (DEFAULT_DOMAIN_NAME, DEFAULT_DOMAIN_ID):
            return DEFAULT_DOMAIN_ID
        raise Unauthorized(_AUTH_FAILED)

    def _scope(
        self, conn: Any, scope: dict[str, Any] | None, user: dict[str, Any], parent: TokenClaims | None
    ) -> dict[str, Any]:
        if scope is None and parent is not None:
            scope = {"project": {"id": parent.project_id}}  # a token exchanged keeps its project
        if scope is None:
            # Keystone would issue an unscoped token; Stratus's tokens always name a project.
            if not user.get("default_project_id"):
                raise Unauthorized(
                    "A project scope is required: name one, or give the user a default project."
                )
            wanted: dict[str, Any] = {"id": user["default_project_id"]}
        else:
            wanted = scope["project"]
        if "id" in wanted:
            project = q.get_project(conn, wanted["id"])
        elif "name" in wanted and "domain" in wanted:
            project = q.project_by_name(conn, wanted["name"], self._domain_id(wanted["domain"]))
        else:
            raise BadRequest("Invalid input for field 'project': give its 'id', or its 'name' and 'domain'.")
        if project is None:
            raise Unauthorized(_AUTH_FAILED)
        return project

    @staticmethod
    def _roles(conn: Any, role_names: frozenset[str]) -> list[dict[str, Any]]:
        by_name = {r["name"]: r["id"] for r in q.list_roles(conn)}
        return [{"id": by_name.get(n, n), "name": n} for n in effective_roles(role_names)]

    def _subject(self, req: falcon.Request) -> Authenticated:
        token = req.get_header(SUBJECT_TOKEN_HEADER)
        if not token:
            raise BadRequest("The X-Subject-Token header is required.")
        caller: Authenticated = req.context.auth
        try:
            subject = self._auth.authenticate(req, token)
        except Unauthorized:
            raise ItemNotFound("Could not find token.") from None
        if subject.claims.user_id != caller.claims.user_id:
            rule = "identity:revoke_token" if req.method == "DELETE" else "identity:validate_token"
            policy.authorize(caller.actor, rule)
        return subject

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        subject = self._subject(req)
        with self._read.connection(req) as conn:
            roles = self._roles(conn, subject.subject.role_names)
        resp.set_header(SUBJECT_TOKEN_HEADER, subject.token)
        resp.media = token_view(
            req, subject.claims, subject.subject, roles, req.get_param("nocatalog") is None
        )

    def on_head(self, req: falcon.Request, resp: falcon.Response) -> None:
        subject = self._subject(req)
        resp.set_header(SUBJECT_TOKEN_HEADER, subject.token)
        resp.status = falcon.HTTP_200

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        subject = self._subject(req)
        claims = subject.claims
        with acting(req.context.command):
            # The whole chain: the token, the one it was issued from, and every one issued from them.
            result = self._handlers.revoke_token(
                RevokeToken(claims.chain, claims.user_id, claims.project_id, claims.expires_at.isoformat())
            )
        self._after(req, result.position, lambda conn: None)
        resp.status = falcon.HTTP_204


class AuthProjects(_Resource):
    """``GET /identity/v3/auth/projects``: the projects the caller may scope a token to."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.user_projects(conn, req.context.actor.user_id)
        resp.media = _collection(req, "projects", [project_view(req, r) for r in rows if r["enabled"]])


class AuthCatalog:
    """``GET /identity/v3/auth/catalog``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"catalog": catalog(req.prefix), "links": {"self": req.url}}


# -- domains --------------------------------------------------------------------------------------
class Domains:
    """``GET /identity/v3/domains``: Stratus has one domain, ``Default`` (id ``default``)."""

    @falcon.before(policy.require("identity:list_domains"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        name = req.get_param("name")
        items = [] if name not in (None, DEFAULT_DOMAIN_NAME) else [_default_domain(req)]
        resp.media = _collection(req, "domains", items)


class Domain:
    @falcon.before(policy.require("identity:get_domain"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, domain_id: str) -> None:
        if domain_id not in (DEFAULT_DOMAIN_ID, DEFAULT_DOMAIN_NAME):
            raise ItemNotFound(f"Could not find domain: {domain_id}.")
        resp.media = {"domain": _default_domain(req)}


def _domain_param(value: str | None) -> str:
    if value in (None, DEFAULT_DOMAIN_ID, DEFAULT_DOMAIN_NAME):
        return DEFAULT_DOMAIN_ID
    raise BadRequest(f"Could not find domain: {value}; Stratus has one domain, {DEFAULT_DOMAIN_NAME}.")


# -- projects -------------------------------------------------------------------------------------
class Projects(_Resource):
    @falcon.before(policy.require("identity:list_projects"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.list_projects(
                conn,
                name=req.get_param("name"),
                domain_id=req.get_param("domain_id"),
                enabled=_flag(req, "enabled"),
            )
        resp.media = _collection(req, "projects", [project_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_project"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.projects.create")["project"]
        domain_id = _domain_param(spec.get("domain_id"))
        if spec.get("parent_id") not in (None, domain_id):
            raise BadRequest("Invalid input for field 'parent_id': Stratus has no project hierarchy.")
        cmd = CreateProject(spec["name"], domain_id, spec.get("description") or "", spec.get("enabled", True))
        with acting(req.context.command):
            result = self._handlers.create_project(cmd)
        row = self._after(req, result.position, lambda conn: self._project(conn, result.id))
        resp.status = falcon.HTTP_201
        resp.media = {"project": project_view(req, row)}


class ProjectItem(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        actor = req.context.actor
        if not policy.allowed(actor, "identity:get_project", project_id=project_id):
            raise ItemNotFound(f"Could not find project: {project_id}.")
        with self._read.connection(req) as conn:
            row = self._project(conn, project_id)
        resp.media = {"project": project_view(req, row)}

    @falcon.before(policy.require("identity:update_project"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        spec = self._body(req, "identity.projects.update")["project"]
        with self._read.connection(req) as conn:
            self._project(conn, project_id)
        cmd = UpdateProject(project_id, description=spec.get("description"), enabled=spec.get("enabled"))
        with acting(req.context.command):
            result = self._handlers.update_project(cmd)
        row = self._after(req, result.position, lambda conn: self._project(conn, project_id))
        resp.media = {"project": project_view(req, row)}

    @falcon.before(policy.require("identity:delete_project"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        with acting(req.context.command):
            result = self._handlers.delete_project(project_id)
        self._after(req, result.position, lambda conn: None)  # its tokens end once the API sees it
        resp.status = falcon.HTTP_204


# -- users ----------------------------------------------------------------------------------------
class Users(_Resource):
    @falcon.before(policy.require("identity:list_users"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.list_users(
                conn,
                name=req.get_param("name"),
                domain_id=req.get_param("domain_id"),
                enabled=_flag(req, "enabled"),
            )
        resp.media = _collection(req, "users", [user_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_user"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.users.create")["user"]
        domain_id = _domain_param(spec.get("domain_id"))
        default_project = spec.get("default_project_id")
        if default_project is not None:
            with self._read.connection(req) as conn:
                self._project(conn, default_project)
        cmd = CreateUser(
            spec["name"],
            domain_id,
            default_project_id=default_project,
            enabled=spec.get("enabled", True),
            email=spec.get("email"),
            description=spec.get("description"),
        )
        with acting(req.context.command):
            result = self._handlers.create_user(cmd)
            if spec.get("password"):
                with self._credentials.setting(result.id, spec["password"]):
                    result = self._handlers.record_password_set(result.id)
        row = self._after(req, result.position, lambda conn: self._user(conn, result.id))
        resp.status = falcon.HTTP_201
        resp.media = {"user": user_view(req, row)}


class UserItem(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        actor = req.context.actor
        if actor.user_id != user_id:
            policy.authorize(actor, "identity:get_user")
        with self._read.connection(req) as conn:
            row = self._user(conn, user_id)
        resp.media = {"user": user_view(req, row)}

    @falcon.before(policy.require("identity:update_user"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        spec = self._body(req, "identity.users.update")["user"]
        with self._read.connection(req) as conn:
            self._user(conn, user_id)
            if spec.get("default_project_id") is not None:
                self._project(conn, spec["default_project_id"])
        cmd = UpdateUser(
            user_id,
            enabled=spec.get("enabled"),
            email=spec.get("email"),
            description=spec.get("description"),
            default_project_id=spec.get("default_project_id"),
        )
        with acting(req.context.command):
            result = self._handlers.update_user(cmd)
            if "password" in spec:
                with self._credentials.setting(user_id, spec["password"]):
                    result = self._handlers.record_password_set(user_id)
        row = self._after(req, result.position, lambda conn: self._user(conn, user_id))
        resp.media = {"user": user_view(req, row)}

    @falcon.before(policy.require("identity:delete_user"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        with acting(req.context.command):
            result = self._handlers.delete_user(user_id)
        self._credentials.forget(user_id)  # after the deletion is recorded: a crash leaves a hash, not a lie
        self._after(req, result.position, lambda conn: None)
        resp.status = falcon.HTTP_204


class UserProjects(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        actor = req.context.actor
        if actor.user_id != user_id:
            policy.authorize(actor, "identity:list_user_projects")
        with self._read.connection(req) as conn:
            self._user(conn, user_id)
            rows = q.user_projects(conn, user_id)
        resp.media = _collection(req, "projects", [project_view(req, r) for r in rows])


# -- roles and grants -----------------------------------------------------------------------------
class Roles(_Resource):
    @falcon.before(policy.require("identity:list_roles"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.list_roles(conn, name=req.get_param("name"))
        resp.media = _collection(req, "roles", [role_view(req, r) for r in rows])


class RoleItem(_Resource):
    @falcon.before(policy.require("identity:get_role"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        with self._read.connection(req) as conn:
            row = self._role(conn, role_id)
        resp.media = {"role": role_view(req, row)}


class Grants(_Resource):
    """``GET /identity/v3/projects/{p}/users/{u}/roles``: a user's roles in a project."""

    @falcon.before(policy.require("identity:list_grants"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, project_id: str, user_id: str) -> None:
        with self._read.connection(req) as conn:
            self._project(conn, project_id)
            self._user(conn, user_id)
            rows = q.list_assignments(conn, user_id=user_id, project_id=project_id)
            roles = [role_view(req, self._role(conn, r["role_id"])) for r in rows]
        resp.media = _collection(req, "roles", roles)


class Grant(_Resource):
    """``PUT``/``HEAD``/``DELETE /identity/v3/projects/{p}/users/{u}/roles/{r}``."""

    def _check(self, req: falcon.Request, project_id: str, user_id: str, role_id: str) -> None:
        with self._read.connection(req) as conn:
            self._project(conn, project_id)
            self._user(conn, user_id)
            self._role(conn, role_id)

    @falcon.before(policy.require("identity:create_grant"))
    def on_put(
        self, req: falcon.Request, resp: falcon.Response, project_id: str, user_id: str, role_id: str
    ) -> None:
        self._check(req, project_id, user_id, role_id)
        with acting(req.context.command):
            result = self._handlers.grant_role(GrantRole(project_id, user_id, role_id))
        self._after(req, result.position, lambda conn: None)
        resp.status = falcon.HTTP_204

    @falcon.before(policy.require("identity:check_grant"))
    def on_head(
        self, req: falcon.Request, resp: falcon.Response, project_id: str, user_id: str, role_id: str
    ) -> None:
        with self._read.connection(req) as conn:
            rows = q.list_assignments(conn, user_id=user_id, project_id=project_id, role_id=role_id)
        if not rows:
            raise ItemNotFound(f"Could not find role assignment of role {role_id} to user {user_id}.")
        resp.status = falcon.HTTP_204

    on_get = on_head

    @falcon.before(policy.require("identity:revoke_grant"))
    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, project_id: str, user_id: str, role_id: str
    ) -> None:
        self._check(req, project_id, user_id, role_id)
        with acting(req.context.command):
            result = self._handlers.revoke_role(RevokeRole(project_id, user_id, role_id))
        self._after(req, result.position, lambda conn: None)
        resp.status = falcon.HTTP_204


class RoleAssignments(_Resource):
    """``GET /identity/v3/role_assignments`` with ``user.id``, ``scope.project.id``, ``role.id``,
    ``effective`` (implied roles listed too) and ``include_names``."""

    @falcon.before(policy.require("identity:list_role_assignments"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        for unsupported in ("group.id", "scope.domain.id", "scope.system"):
            if req.get_param(unsupported):
                resp.media = _collection(
                    req, "role_assignments", []
                )  # Stratus has no groups, domain or system roles
                return
        names = _flag(req, "include_names") or False
        with self._read.connection(req) as conn:
            rows = q.list_assignments(
                conn,
                user_id=req.get_param("user.id"),
                project_id=req.get_param("scope.project.id"),
            )
            roles = {r["name"]: r for r in q.list_roles(conn)}
        wanted_role = req.get_param("role.id")
        items = []
        for row in rows:
            granted = [row["role_name"]]
            if _flag(req, "effective"):
                granted = list(effective_roles(frozenset(granted)))
            for role_name in granted:
                role = roles.get(role_name)
                if role is None or (wanted_role and role["id"] != wanted_role):
                    continue
                items.append(self._view(req, row, role, names))
        resp.media = _collection(req, "role_assignments", items)

    @staticmethod
    def _view(req: falcon.Request, row: dict[str, Any], role: dict[str, Any], names: bool) -> dict[str, Any]:
        item: dict[str, Any] = {
            "role": {"id": role["id"]},
            "user": {"id": row["user_id"]},
            "scope": {"project": {"id": row["project_id"]}},
            "links": {
                "assignment": _url(
                    req, "projects", row["project_id"], "users", row["user_id"], "roles", role["id"]
                )
            },
        }
        if names:
            item["role"]["name"] = role["name"]
            item["user"].update(
                name=row["user_name"], domain=_domain_ref(row["user_domain_id"] or DEFAULT_DOMAIN_ID)
            )
            item["scope"]["project"].update(
                name=row["project_name"], domain=_domain_ref(row["project_domain_id"] or DEFAULT_DOMAIN_ID)
            )
        return item


# -- errors in Keystone's shape -------------------------------------------------------------------
class KeystoneErrors:
    """Middleware: under ``/identity``, Nova's fault body becomes Keystone's ``{"error": {...}}``."""

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if not (req.path == PREFIX or req.path.startswith(PREFIX + "/")):
            return
        media = resp.media
        if not isinstance(media, dict) or len(media) != 1:
            return
        (fault,) = media.values()
        if not isinstance(fault, dict) or "code" not in fault or "message" not in fault:
            return
        code = int(fault["code"])
        if code < 400:
            return
        error = {"code": code, "title": _TITLES.get(code, "Error"), "message": fault["message"]}
        resp.media = {"error": error}


def add_routes(app: falcon.App, **collaborators: Any) -> None:
    """Mount the identity API under ``/identity`` (``collaborators``: see ``_Resource``)."""
    app.add_route(PREFIX, Versions())
    app.add_route(V3, Version())
    app.add_route(f"{V3}/auth/tokens", Tokens(**collaborators))
    app.add_route(f"{V3}/auth/projects", AuthProjects(**collaborators))
    app.add_route(f"{V3}/auth/catalog", AuthCatalog())
    app.add_route(f"{V3}/domains", Domains())
    app.add_route(f"{V3}/domains/{{domain_id}}", Domain())
    app.add_route(f"{V3}/projects", Projects(**collaborators))
    app.add_route(f"{V3}/projects/{{project_id}}", ProjectItem(**collaborators))
    app.add_route(f"{V3}/projects/{{project_id}}/users/{{user_id}}/roles", Grants(**collaborators))
    app.add_route(f"{V3}/projects/{{project_id}}/users/{{user_id}}/roles/{{role_id}}", Grant(**collaborators))
    app.add_route(f"{V3}/users", Users(**collaborators))
    app.add_route(f"{V3}/users/{{user_id}}", UserItem(**collaborators))
    app.add_route(f"{V3}/users/{{user_id}}/projects", UserProjects(**collaborators))
    app.add_route(f"{V3}/roles", Roles(**collaborators))
    app.add_route(f"{V3}/roles/{{role_id}}", RoleItem(**collaborators))
    app.add_route(f"{V3}/role_assignments", RoleAssignments(**collaborators))
