"""What every module of the identity API shares: its paths, collections with their links, and the
``Resource`` base (collaborators, bodies, reads after writes, lookups that answer Keystone's 404)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import falcon
from jsonschema import Draft202012Validator

from api import policy
from api.body import read_json
from api.errors import ItemNotFound
from api.identity.credentials import Credentials
from api.readmodel import ReadModel
from commands.bus import MessageBus
from commands.identity import DEFAULT_DOMAIN_ID, DEFAULT_DOMAIN_NAME
from commands.unit_of_work import Result
from projections import directory_queries as dq
from projections import identity_queries as q
from stratus.context import acting

if TYPE_CHECKING:  # api.auth checks tokens with api.identity.tokens: importing it here would loop
    from api.auth import Authenticator

PREFIX = "/identity"
V3 = f"{PREFIX}/v3"
Row = dict[str, Any]
# Every failed authentication says only this (an unknown user and a wrong password look alike).
AUTH_FAILED = "The request you have made requires authentication."


def url(req: falcon.Request, *parts: str) -> str:
    return "/".join([f"{req.prefix}{V3}", *parts])


def domain_ref(domain_id: str, names: dict[str, Row] | None = None) -> dict[str, str]:
    """``{"id", "name"}`` of a domain; ``names``: domain rows by id, when the caller has them."""
    row = (names or {}).get(domain_id)
    name = row["name"] if row else (DEFAULT_DOMAIN_NAME if domain_id == DEFAULT_DOMAIN_ID else domain_id)
    return {"id": domain_id, "name": name}


def collection(req: falcon.Request, key: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: items, "links": {"self": req.url, "previous": None, "next": None}}


def flag(req: falcon.Request, name: str) -> bool | None:
    value = req.get_param(name)
    if value is None:
        return None
    return value.strip().lower() not in ("0", "false", "no", "off", "")


def filters(req: falcon.Request, *names: str) -> dict[str, Any]:
    """A list's query filters by name: ``enabled`` read as a ``flag``, the others as given (None: absent)."""
    return {name: flag(req, name) if name == "enabled" else req.get_param(name) for name in names}


# -- the base of every identity resource ----------------------------------------------------------
class Resource:
    """The base of every identity resource: its collaborators, and what its handlers share."""

    def __init__(
        self,
        bus: MessageBus,
        read: ReadModel,
        validators: dict[str, Draft202012Validator],
        credentials: Credentials,
        authenticator: Authenticator,
        max_body_bytes: int,
    ) -> None:
        self._bus = bus
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

    def _written(self, req: falcon.Request, position: int) -> None:
        """Answer once the read model has applied ``position`` (the client's next read sees it)."""
        self._after(req, position, lambda conn: None)

    def _handle(self, req: falcon.Request, cmd: object) -> Result:
        """Run ``cmd`` as the caller (its events name the request's actor, request and correlation)."""
        with acting(req.context.command):
            result: Result = self._bus.handle(cmd)
        return result

    def _handled(self, req: falcon.Request, cmd: object) -> None:
        """Run ``cmd`` as the caller; answer once the read model has what it wrote."""
        self._written(req, self._handle(req, cmd).position)

    def _wrote(self, req: falcon.Request, cmd: object, fetch: Callable[[Any, str], Row]) -> Row:
        """Run ``cmd`` as the caller, then read the row it wrote (``fetch(conn, id)``, ``self._project``...)
        once the read model has it."""
        result = self._handle(req, cmd)
        row: Row = self._after(req, result.position, lambda conn: fetch(conn, result.id))
        return row

    @staticmethod
    def _themself_or(req: falcon.Request, user_id: str, rule: str) -> None:
        """A user may act on what is theirs; anyone else needs what ``rule`` allows (403 otherwise)."""
        if req.context.actor.user_id != user_id:
            policy.authorize(req.context.actor, rule)

    def _theirs(
        self, req: falcon.Request, user_id: str, rule: str, query: Callable[[Any, str], list[Row]]
    ) -> list[Row]:
        """``query(conn, user_id)``: what the user has, for themself or whoever ``rule`` allows (404 for
        a user not there)."""
        self._themself_or(req, user_id, rule)
        with self._read.connection(req) as conn:
            self._user(conn, user_id)
            return query(conn, user_id)

    @staticmethod
    def _found(row: Row | None, what: str, given: str) -> Row:
        if row is None:
            raise ItemNotFound(f"Could not find {what}: {given}.")
        return row

    def _project(self, conn: Any, project_id: str) -> Row:
        return self._found(q.get_project(conn, project_id), "project", project_id)

    def _user(self, conn: Any, user_id: str) -> Row:
        return self._found(q.get_user(conn, user_id), "user", user_id)

    def _role(self, conn: Any, role_id: str) -> Row:
        return self._found(q.get_role(conn, role_id), "role", role_id)

    def _domain(self, conn: Any, domain_id: str) -> Row:
        return self._found(dq.get_domain(conn, domain_id), "domain", domain_id)

    def _group(self, conn: Any, group_id: str) -> Row:
        return self._found(dq.get_group(conn, group_id), "group", group_id)

    def _domain_param(self, conn: Any, value: str | None) -> str:
        """The domain a new project, user or group goes in (``default`` when none is named)."""
        if value is None or (value == DEFAULT_DOMAIN_ID and dq.get_domain(conn, value) is None):
            return DEFAULT_DOMAIN_ID  # (a log from before domains were recorded has no row for it)
        return str(self._domain(conn, value)["id"])
