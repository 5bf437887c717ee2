"""Who is calling: the ``X-Auth-Token`` of every request, verified; and the scoping helpers of policy.

A request must carry a token that this deployment issued (``api/identity/tokens.py``), that has not expired,
and whose user and project still exist, are enabled and hold at least one role there, that was not
revoked (nor any token of its chain), and that was issued after the user's last password change,
disable or role removal. The last three are read from the identity read model on every request, so disabling a
user or revoking a token takes effect on the next request once the API has seen the event (the
endpoints that disable or revoke wait for that before they answer).

A resource that needs no identity (version documents, Keystone's discovery, issuing a token) says
so with ``public = frozenset({"GET"})`` (the methods open to anyone). Everything else answers 401
without a valid token. The rules themselves are in ``api/policy.py``.

**A list's read beside its token's check.** The check is a round trip to PostgreSQL before the
resource's own: about a sixth of a page's wall (docs/performance.md, "API: `GET /servers/detail`").
A resource that only reads may say ``read_beside_check = frozenset({"GET"})``: once a token has
been checked, its next requests act on what that check found (``Authenticator.speculate``) while
the same check runs again on another thread and connection, and the response leaves only if the new
answer is the same and lets the token in (``confirmed``). Anything else (a revocation, a role
changed, a disabled user, an error) and the request is answered again from the start with the check
first (``api.middleware.CheckedApp``), so the answer is exactly the one the serial check gives; the
resource's SQL may run once for a revoked token, and its rows are dropped unseen.
"""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

import falcon

from api.errors import BadRequest, Forbidden, ServiceUnavailable, Unauthorized
from api.identity.tokens import InvalidToken, TokenClaims, TokenSigner
from api.log_identity import CannotTell, IdentityFromLog
from api.readmodel import ReadModel
from commands.app import Stratus
from commands.errors import NotFound
from commands.identity import effective_roles
from commands.keystone import loaders as identities
from commands.unit_of_work import UnitOfWork
from projections import identity_queries
from projections.queries import ReadModelUnavailable
from stratus.context import Actor
from stratus.recent import Recent

log = logging.getLogger("stratus.api")

TOKEN_HEADER = "X-Auth-Token"
ADMIN_ROLE = "admin"
# What a resource that only reads in these methods says to read beside its token's check.
READ_BESIDE_CHECK = frozenset({"GET"})


@dataclass(frozen=True)
class Authenticated:
    """A verified token and what it stands for now."""

    token: str
    claims: TokenClaims
    actor: Actor
    subject: identity_queries.Subject
    # The same check running again beside the request (``Authenticator.speculate``); None: checked.
    pending: Future[identity_queries.Subject | None] | None = None


class Authenticator:
    """Checks a request's token and reads who it acts for (keystonemiddleware's part, for every API)."""

    def __init__(
        self,
        signer: TokenSigner,
        read: ReadModel,
        identity_url: str = "",
        from_log: IdentityFromLog | None = None,
        checks: Executor | None = None,
        checks_at_once: int = 4,
    ) -> None:
        self.signer = signer
        self._read = read
        self._identity_url = identity_url
        # Who a token speaks for while the read model is away (api/log_identity.py); None: a 503.
        self._from_log = from_log
        # Where a check runs beside its request (``speculate``); None: every check before its request.
        self._checks = checks
        # At most this many beside requests at once: past it, a request's check runs first, so that a
        # busy process never makes a request wait for a thread (nor its pool for a connection). A
        # slot is taken with pop and given back with append, each atomic (a semaphore's Condition
        # cost more than the rest of a request's hand-over to the check's thread).
        self._slots: deque[None] = deque([None] * checks_at_once)
        # Each token's last check: what it found, and the actor it made of it.
        self._checked: Recent[str, tuple[identity_queries.Subject, Actor]] = Recent(4096)

    def challenge(self, req: falcon.Request) -> dict[str, str]:
        """Where to get a token: keystonemiddleware's ``WWW-Authenticate`` header."""
        base = self._identity_url or f"{req.prefix}/identity"
        return {"WWW-Authenticate": f'Keystone uri="{base}"'}

    def authenticate(self, req: falcon.Request, token: str | None = None) -> Authenticated:
        """The request's identity (or that of ``token``); ``Unauthorized`` if there is none."""
        token, claims = self._verified(req, token)
        return self._checked_now(req, token, claims)

    def speculate(self, req: falcon.Request) -> Authenticated:
        """The request's identity as its token's last check found it, with the same check running
        again beside the request (``pending``: the caller must have it ``confirmed`` before anything
        of the request leaves); checked now, as ``authenticate`` does, when this process has not
        checked the token yet or no thread is free."""
        token, claims = self._verified(req, None)
        checked = self._checked.get(token)
        if checked is None or self._checks is None or not self._slot():
            return self._checked_now(req, token, claims)
        try:
            pending = self._checks.submit(self._beside, req, claims)
        except RuntimeError:  # the executor is shut down: the process is stopping
            self._slots.append(None)
            return self._checked_now(req, token, claims)
        seen, actor = checked
        return Authenticated(token, claims, actor, seen, pending)

    def _slot(self) -> bool:
        try:
            self._slots.pop()
        except IndexError:
            return False
        return True

    def _beside(self, req: falcon.Request, claims: TokenClaims) -> identity_queries.Subject | None:
        """The check running beside its request, giving back its slot when done."""
        try:
            return self._subject(req, claims)
        finally:
            self._slots.append(None)

    def confirmed(self, authenticated: Authenticated) -> bool:
        """Whether the check running beside a request found what the request acted on, and lets the
        token in: only then may its response leave. Waits for the check."""
        if authenticated.pending is None:
            return True
        try:
            fresh = authenticated.pending.result()
        except Exception as e:  # answered again with the check first, which says what it is
            log.debug("the check beside the request failed (%s): answering it again", e)
            return False
        if fresh == authenticated.subject and not _refused(fresh):
            return True
        self._checked.drop(authenticated.token)
        return False

    def _verified(self, req: falcon.Request, token: str | None) -> tuple[str, TokenClaims]:
        """The request's token (or ``token``) and its claims, its signature and expiry verified."""
        token = token if token is not None else req.get_header(TOKEN_HEADER)
        if not token:
            raise Unauthorized(
                "The request you have made requires authentication.", headers=self.challenge(req)
            )
        try:
            return token, self.signer.verify(token.strip())
        except InvalidToken as e:
            log.info("token rejected (request %s): %s", getattr(req.context, "request_id", "-"), e)
            raise Unauthorized(
                "The request you have made requires authentication.", headers=self.challenge(req)
            ) from None

    def _checked_now(self, req: falcon.Request, token: str, claims: TokenClaims) -> Authenticated:
        try:
            subject = self._subject(req, claims)
        except (ServiceUnavailable, ReadModelUnavailable) as unavailable:
            if self._from_log is None:
                raise
            try:
                subject = self._from_log.subject(claims)
            except CannotTell as e:
                log.info("no read model, and the log cannot tell (request %s): %s", req.context.request_id, e)
                raise unavailable from None
        reason = _refused(subject)
        if reason:
            self._checked.drop(token)
            log.info("token %s refused (request %s): %s", claims.token_id, req.context.request_id, reason)
            raise Unauthorized(
                "The request you have made requires authentication.", headers=self.challenge(req)
            )
        assert subject is not None
        actor = Actor(claims.user_id, claims.project_id, effective_roles(subject.role_names))
        self._checked.put(token, (subject, actor))
        return Authenticated(token, claims, actor, subject)

    def _subject(self, req: falcon.Request, claims: TokenClaims) -> identity_queries.Subject | None:
        """The token's subject as the identity read model has it now (waiting for no write of the
        request's actor: it is not known yet, or only as this check will say)."""
        with self._read.connection(req, as_anyone=True) as conn:
            if not claims.project_id:  # scoped to the system
                return identity_queries.system_subject(
                    conn, claims.user_id, (claims.token_id, claims.chain), claims.issued_at
                )
            return identity_queries.subject(
                conn,
                claims.user_id,
                claims.project_id,
                (claims.token_id, claims.chain),
                claims.issued_at,
                claims.application_credential_id,
            )


def _refused(subject: identity_queries.Subject | None) -> str:
    if subject is None:
        return "unknown user or project"
    if subject.revoked:
        return "revoked"
    if not subject.user["enabled"]:
        return "user disabled"
    if not subject.project["enabled"]:
        return "project disabled"
    if not subject.role_names:
        return "no role in the project"
    return ""


def is_public(resource: Any, method: str) -> bool:
    return method in getattr(resource, "public", frozenset())


def reads_beside_check(resource: Any, method: str) -> bool:
    return method in getattr(resource, "read_beside_check", frozenset())


# -- scoping helpers the compute resources use ----------------------------------------------------
def is_admin(actor: Actor) -> bool:
    return ADMIN_ROLE in actor.roles


def require_admin(actor: Actor, action: str) -> None:
    if not is_admin(actor):
        raise Forbidden(f"Policy doesn't allow {action} to be performed.")


def project_scope(actor: Actor, all_tenants: bool) -> str | None:
    """The project whose servers a listing shows; None (every project) for an admin's ``all_tenants``."""
    if all_tenants:
        require_admin(actor, "os_compute_api:servers:index:get_all_tenants")
        return None
    return actor.project_id


def server_scope(actor: Actor) -> str | None:
    """The project a server must belong to for ``actor`` to see or act on it (None: any, for admins)."""
    return None if is_admin(actor) else actor.project_id


def require_project(app: Stratus, project_id: str) -> None:
    """A project named in a request body must exist: Nova asks Keystone (``verify_project_id``) and
    answers 400 for an unknown one. Read from the log, so a project created a moment ago counts."""
    try:
        identities.project(UnitOfWork(app), project_id)
    except NotFound:
        raise BadRequest(f"Project ID {project_id} is not a valid project.") from None
