"""``/identity/v3/auth/...``: tokens (issue, validate, revoke) and what a token may be scoped to.

Tokens are issued for a password, a token or an application credential, scoped to a project or the
system. Issuing writes nothing (a Fernet token carries its claims: ``api/identity/tokens.py``);
revoking is an event on the log, answered once the read model has applied it, so that the next
request with the revoked token fails.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import falcon

from api import policy
from api.errors import BadRequest, ItemNotFound, TooManyRequests, Unauthorized
from api.identity import application_credentials as appcreds
from api.identity.catalog import catalog
from api.identity.common import AUTH_FAILED, Resource, collection
from api.identity.roles import implied_by, with_implied
from api.identity.tokens import TokenClaims
from api.identity.views import domain_view, project_view, token_view
from commands.identity import DEFAULT_DOMAIN_ID, DEFAULT_DOMAIN_NAME, effective_roles
from commands.keystone.tokens import RevokeToken
from projections import directory_queries as dq
from projections import identity_queries as q
from stratus.context import acting

if TYPE_CHECKING:  # api.auth checks tokens with api.identity.tokens: importing it here would loop
    from api.auth import Authenticated

log = logging.getLogger("stratus.api")

SUBJECT_TOKEN_HEADER = "X-Subject-Token"
SCHEMAS = ("identity.auth",)


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
                raise Unauthorized(AUTH_FAILED)
            if system:
                role_names = q.system_role_names(conn, user["id"])
            else:
                role_names = q.user_role_names(conn, user["id"], project["id"])
            if credential is not None:
                role_names = appcreds.restricted(conn, credential, role_names)
            if not role_names:
                raise Unauthorized(AUTH_FAILED)
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
            services = catalog(conn, req) if req.get_param("nocatalog") is None else None
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
            raise Unauthorized(AUTH_FAILED)
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
            raise Unauthorized(AUTH_FAILED)
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
            raise Unauthorized(AUTH_FAILED)
        return project

    @staticmethod
    def _roles(conn: Any, role_names: frozenset[str]) -> list[dict[str, Any]]:
        """The token's roles: those held, and those they imply (built in, and rules made by hand)."""
        roles = {r["id"]: r for r in q.list_roles(conn)}
        by_name = {r["name"]: r["id"] for r in roles.values()}
        held = [{"role_id": by_name[n]} for n in effective_roles(role_names) if n in by_name]
        ids = {r["role_id"] for r in with_implied(held, implied_by(conn, roles))}
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
            services = catalog(conn, req) if req.get_param("nocatalog") is None else None
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
            result = self._bus.handle(
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


class AuthCatalog(Resource):
    """``GET /identity/v3/auth/catalog``: the catalog of the caller's token."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            resp.media = {"catalog": catalog(conn, req), "links": {"self": req.url}}
