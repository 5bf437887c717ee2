"""``/identity``: Keystone's v3 API as operators use it; this module serves discovery, tokens,
projects and users, and mounts the others (``identity_domains``: domains and groups;
``identity_roles``: roles and every kind of role assignment; ``identity_catalog``: regions,
services, endpoints and the catalog; ``identity_appcreds``: application credentials).

Tokens are issued for a password, a token or an application credential, scoped to a project.
Writes are identity commands on the event log; reads come from the identity read model.
A write that clients read back at once (a created project, a disabled user, a revoked token)
answers only once the read model has applied it, so the next request sees its effect.

Errors have Keystone's shape (``{"error": {"code", "title", "message"}}``) instead of Nova's:
``KeystoneErrors`` rewrites the faults ``api/errors.py`` produced for paths under ``/identity``.
"""

from __future__ import annotations

import logging
from typing import Any

import falcon

from api import identity_appcreds as appcreds
from api import identity_catalog, identity_domains, identity_roles, policy
from api.auth import Authenticated
from api.errors import BadRequest, ItemNotFound, TooManyRequests, Unauthorized
from api.identity_common import (
    PREFIX,
    V3,
    Resource,
    collection,
    domain_ref,
    domain_view,
    flag,
    project_view,
    user_view,
)
from api.tokens import TokenClaims, isoformat
from commands.identity import DEFAULT_DOMAIN_ID, DEFAULT_DOMAIN_NAME, effective_roles
from commands.identity_handlers import (
    CreateProject,
    CreateUser,
    RevokeToken,
    UpdateProject,
    UpdateUser,
)
from projections import directory_queries as dq
from projections import identity_queries as q
from stratus.context import Actor, CommandContext, acting

log = logging.getLogger("stratus.api")

SUBJECT_TOKEN_HEADER = "X-Subject-Token"
IDENTITY_SCHEMAS = (
    "identity.auth",
    "identity.projects.create",
    "identity.projects.update",
    "identity.users.create",
    "identity.users.update",
    "identity.users.password",
    *identity_domains.SCHEMAS,
    *identity_roles.SCHEMAS,
    *identity_catalog.SCHEMAS,
    *appcreds.SCHEMAS,
)
_UPDATED = "2024-04-03T00:00:00Z"
_AUTH_FAILED = "The request you have made requires authentication."
_TITLES = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
    429: "Too Many Requests",
}  # fmt: skip


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
class Tokens(Resource):
    """``/identity/v3/auth/tokens``: issue (POST, no token needed), validate (GET, HEAD), revoke (DELETE)."""

    public = frozenset({"POST"})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth = self._body(req, "identity.auth")["auth"]
        identity = auth["identity"]
        method = identity["methods"][0]
        parent: TokenClaims | None = None
        credential: dict[str, Any] | None = None
        # Secrets are checked holding no read-model connection: the check (and the throttle)
        # take their own from the same pool, and concurrent logins must not exhaust it.
        user = self._password_user(req, identity.get("password")) if method == "password" else None
        if method == "application_credential":
            credential, user = appcreds.authenticate(self._read, self._credentials, req, identity)
        with self._read.connection(req) as conn:
            if user is None:
                if "token" not in identity:
                    raise BadRequest("Invalid input for field 'identity': the token method needs 'token'.")
                given = self._auth.authenticate(req, identity["token"]["id"])
                parent = given.claims
                user = q.get_user(conn, parent.user_id) or dict(given.subject.user)
            scope = auth.get("scope")
            system = "system" in (scope or {}) or (
                scope is None and parent is not None and not parent.project_id
            )
            if credential is not None:
                project = appcreds.scope(conn, credential, scope)
            elif system:
                project = q.SYSTEM_PROJECT
            else:
                project = self._scope(conn, scope, user, parent)
            domains = dq.names(conn, "domains", [user["domain_id"], project["domain_id"]])
            if not all(r["enabled"] for r in (user, project, *domains.values())):
                raise Unauthorized(_AUTH_FAILED)
            if system:
                role_names = q.system_role_names(conn, user["id"])
            else:
                role_names = q.user_role_names(conn, user["id"], project["id"])
            if credential is not None:
                role_names = appcreds.restricted(conn, credential, role_names)
            if not role_names:
                raise Unauthorized(_AUTH_FAILED)
            # A token from a token keeps its parent's chain and expiry (never a longer life).
            token, claims = self._auth.signer.issue(
                user["id"],
                project["id"],
                (method,),
                parent=parent,
                application_credential_id=credential["id"] if credential else "",
                expires_at=credential["expires_at"] if credential else None,
            )
            roles = self._roles(conn, role_names)
            services = identity_catalog.catalog(conn, req) if req.get_param("nocatalog") is None else None
            credential = credential or appcreds.of_token(conn, claims)
        subject = q.Subject(user, project, role_names, revoked=False)
        resp.status = falcon.HTTP_201
        resp.set_header(SUBJECT_TOKEN_HEADER, token)
        resp.media = token_view(req, claims, subject, roles, services, domains, credential)

    def _password_user(self, req: falcon.Request, password: dict[str, Any] | None) -> dict[str, Any]:
        if not password:
            raise BadRequest("Invalid input for field 'identity': the password method needs 'password'.")
        given = password["user"]
        with self._read.connection(req) as conn:
            if "id" in given:
                user = q.get_user(conn, given["id"])
                who = str(given["id"])
            elif "name" in given and "domain" in given:
                domain_id = self._domain_id(conn, given["domain"])
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
    def _domain_id(conn: Any, domain: dict[str, str]) -> str:
        """The id of the domain named by its id or name (401 when there is none)."""
        row = dq.get_domain(conn, domain["id"]) if "id" in domain else dq.domain_by_name(conn, domain["name"])
        default = (domain.get("id", DEFAULT_DOMAIN_ID), domain.get("name", DEFAULT_DOMAIN_NAME))
        if row is None and default == (DEFAULT_DOMAIN_ID, DEFAULT_DOMAIN_NAME):
            return DEFAULT_DOMAIN_ID  # a log from before domains were recorded
        if row is None or ("name" in domain and row["name"] != domain["name"]):
            raise Unauthorized(_AUTH_FAILED)
        return str(row["id"])

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
            project = q.project_by_name(conn, wanted["name"], self._domain_id(conn, wanted["domain"]))
        else:
            raise BadRequest("Invalid input for field 'project': give its 'id', or its 'name' and 'domain'.")
        if project is None:
            raise Unauthorized(_AUTH_FAILED)
        return project

    @staticmethod
    def _roles(conn: Any, role_names: frozenset[str]) -> list[dict[str, Any]]:
        """The token's roles: those held, and those they imply (built in, and rules made by hand)."""
        roles = {r["id"]: r for r in q.list_roles(conn)}
        by_name = {r["name"]: r["id"] for r in roles.values()}
        held = [{"role_id": by_name[n]} for n in effective_roles(role_names) if n in by_name]
        ids = {
            r["role_id"] for r in identity_roles.with_implied(held, identity_roles.implied_by(conn, roles))
        }
        return sorted(({"id": i, "name": roles[i]["name"]} for i in ids), key=lambda r: (r["name"], r["id"]))

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
        user, project = subject.subject.user, subject.subject.project
        with self._read.connection(req) as conn:
            roles = self._roles(conn, subject.subject.role_names)
            services = identity_catalog.catalog(conn, req) if req.get_param("nocatalog") is None else None
            domains = dq.names(conn, "domains", [user["domain_id"], project["domain_id"]])
            credential = appcreds.of_token(conn, subject.claims)
        resp.set_header(SUBJECT_TOKEN_HEADER, subject.token)
        resp.media = token_view(req, subject.claims, subject.subject, roles, services, domains, credential)

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


class AuthProjects(Resource):
    """``GET /identity/v3/auth/projects``: the projects the caller may scope a token to."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.user_projects(conn, req.context.actor.user_id)
        resp.media = collection(req, "projects", [project_view(req, r) for r in rows if r["enabled"]])


class AuthDomains(Resource):
    """``GET /identity/v3/auth/domains``: the domains the caller holds a role on."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = dq.user_domains(conn, req.context.actor.user_id)
        resp.media = collection(req, "domains", [domain_view(req, r) for r in rows if r["enabled"]])


class AuthSystem(Resource):
    """``GET /identity/v3/auth/system``: the system, if the caller holds a role on it."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            held = q.system_role_names(conn, req.context.actor.user_id)
        resp.media = {"system": [{"all": True}] if held else [], "links": {"self": req.url}}


# -- projects -------------------------------------------------------------------------------------
class Projects(Resource):
    @falcon.before(policy.require("identity:list_projects"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.list_projects(
                conn,
                name=req.get_param("name"),
                domain_id=req.get_param("domain_id"),
                enabled=flag(req, "enabled"),
            )
        resp.media = collection(req, "projects", [project_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_project"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.projects.create")["project"]
        with self._read.connection(req) as conn:
            domain_id = self._domain_param(conn, spec.get("domain_id"))
        if spec.get("parent_id") not in (None, domain_id):
            raise BadRequest("Invalid input for field 'parent_id': Stratus has no project hierarchy.")
        cmd = CreateProject(spec["name"], domain_id, spec.get("description") or "", spec.get("enabled", True))
        with acting(req.context.command):
            result = self._handlers.create_project(cmd)
        row = self._after(req, result.position, lambda conn: self._project(conn, result.id))
        resp.status = falcon.HTTP_201
        resp.media = {"project": project_view(req, row)}


class ProjectItem(Resource):
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
        cmd = UpdateProject(
            project_id,
            name=spec.get("name"),
            description=spec.get("description"),
            enabled=spec.get("enabled"),
        )
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
class Users(Resource):
    @falcon.before(policy.require("identity:list_users"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.list_users(
                conn,
                name=req.get_param("name"),
                domain_id=req.get_param("domain_id"),
                enabled=flag(req, "enabled"),
            )
        resp.media = collection(req, "users", [user_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_user"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.users.create")["user"]
        default_project = spec.get("default_project_id")
        with self._read.connection(req) as conn:
            domain_id = self._domain_param(conn, spec.get("domain_id"))
            if default_project is not None:
                self._project(conn, default_project)
        cmd = CreateUser(
            spec["name"],
            domain_id,
            default_project_id=default_project,
            enabled=spec.get("enabled", True),
            email=spec.get("email"),
            description=spec.get("description"),
            extra=_extra(spec),
        )
        with acting(req.context.command):
            result = self._handlers.create_user(cmd)
            if spec.get("password"):
                with self._credentials.setting(result.id, spec["password"]):
                    result = self._handlers.record_password_set(result.id)
        row = self._after(req, result.position, lambda conn: self._user(conn, result.id))
        resp.status = falcon.HTTP_201
        resp.media = {"user": user_view(req, row)}


# What a user body may say that is Keystone's own; anything else is an extra attribute, kept.
_USER_FIELDS = frozenset(
    {
        "id",
        "name",
        "domain_id",
        "default_project_id",
        "password",
        "enabled",
        "email",
        "description",
        "options",
    }
)


def _extra(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k not in _USER_FIELDS}


class UserItem(Resource):
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
        if spec.get("id", user_id) != user_id:
            raise BadRequest("Invalid input for field 'id': a user's id cannot change.")
        with self._read.connection(req) as conn:
            self._user(conn, user_id)
            if spec.get("default_project_id") is not None:
                self._project(conn, spec["default_project_id"])
        cmd = UpdateUser(
            user_id,
            name=spec.get("name"),
            extra=_extra(spec),
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


class UserPassword(Resource):
    """``POST /identity/v3/users/{u}/password``: a user changes their own password, proving the old
    one (no token needed, as in Keystone: a user whose password expired can still change it)."""

    public = frozenset({"POST"})

    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        spec = self._body(req, "identity.users.password")["user"]
        source = req.remote_addr or "-"
        throttle = self._credentials.throttle
        if throttle.retry_after(user_id, source):
            raise Unauthorized(_AUTH_FAILED)
        if not self._credentials.check(user_id, spec["original_password"]):
            throttle.failed(user_id, source)
            raise Unauthorized(_AUTH_FAILED)
        throttle.succeeded(user_id)
        # No token: the user, proven by their password, is the actor (in no project).
        command = CommandContext(actor=Actor(user_id, ""), request_id=req.context.request_id)
        with acting(command), self._credentials.setting(user_id, spec["password"]):
            result = self._handlers.record_password_set(user_id)
        self._written(req, result.position)
        resp.status = falcon.HTTP_204


class UserProjects(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        actor = req.context.actor
        if actor.user_id != user_id:
            policy.authorize(actor, "identity:list_user_projects")
        with self._read.connection(req) as conn:
            self._user(conn, user_id)
            rows = q.user_projects(conn, user_id)
        resp.media = collection(req, "projects", [project_view(req, r) for r in rows])


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
    """Mount the identity API under ``/identity`` (``collaborators``: see ``Resource``)."""
    app.add_route(PREFIX, Versions())
    app.add_route(V3, Version())
    app.add_route(f"{V3}/auth/tokens", Tokens(**collaborators))
    app.add_route(f"{V3}/auth/projects", AuthProjects(**collaborators))
    app.add_route(f"{V3}/auth/domains", AuthDomains(**collaborators))
    app.add_route(f"{V3}/auth/system", AuthSystem(**collaborators))
    app.add_route(f"{V3}/projects", Projects(**collaborators))
    app.add_route(f"{V3}/projects/{{project_id}}", ProjectItem(**collaborators))
    app.add_route(f"{V3}/users", Users(**collaborators))
    app.add_route(f"{V3}/users/{{user_id}}", UserItem(**collaborators))
    app.add_route(f"{V3}/users/{{user_id}}/projects", UserProjects(**collaborators))
    app.add_route(f"{V3}/users/{{user_id}}/password", UserPassword(**collaborators))
    for module in (identity_domains, identity_roles, identity_catalog, appcreds):
        module.add_routes(app, V3, **collaborators)
