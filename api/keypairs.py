"""``/v2.1/os-keypairs``: a user's key pairs, in Nova's shapes per microversion.

From 2.2 a key pair has a ``type``: ``ssh`` (an OpenSSH public key) or ``x509`` (a PEM certificate,
fingerprinted as Nova does: SHA-1, colon hex), create answers 201 and delete 204; from 2.10 an
admin names the ``user_id`` whose key pairs to create, list, show or delete; 2.35 pages the list
(``limit``, ``marker``: a name); from 2.92 Stratus no longer generates key pairs (``public_key`` is
required) and names may hold ``@`` and ``.``.

Key pairs belong to the calling user. ``POST`` with a ``public_key`` imports it; without one
(before 2.92), Stratus generates an RSA key pair (or, for ``x509``, a key and its self-signed
certificate) and answers its private key this once: it is never stored, logged or recorded in an
event. The ssh fingerprint is Nova's (MD5 of the key blob, colon hex).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from uuid import UUID

import falcon
from jsonschema import Draft202012Validator

from api import auth, versions
from api.body import read_json
from api.errors import BadRequest, ItemNotFound
from api.links import MAX_LIMIT, next_links, page_params
from api.readmodel import POSITION_HEADER, ReadModel
from commands import loaders
from commands.bus import MessageBus
from commands.errors import NotFound
from commands.keypair import SSH, KeyPair
from commands.keypairs.manage import CreateKeyPair, DeleteKeyPair
from projections import keypair_queries
from stratus.context import Actor, acting

_POLICY = "os_compute_api:os-keypairs:%s"
# Nova's keypair_name_special_chars, and 2.92's (adds "@" and ".")
_NAME = re.compile(r"^[_\- a-zA-Z0-9]+$")
_NAME_V292 = re.compile(r"^[_\-@. a-zA-Z0-9]+$")


def _time(value: Any) -> str | None:
    return None if value is None else value.replace(tzinfo=None).isoformat()


def integer_id(keypair_id: UUID | str) -> int:
    """A key pair's id as Nova shows it (its database's integer), stable: from the aggregate's UUID."""
    return int(UUID(str(keypair_id)).int >> 97) or 1


def _unexpected(name: str) -> BadRequest:
    return BadRequest(
        "Invalid input for field/attribute keypair. "
        f"Additional properties are not allowed ({name!r} was unexpected)"
    )


class _KeyPairs:
    def __init__(
        self,
        bus: MessageBus,
        read_model: ReadModel,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
    ) -> None:
        self._bus = bus
        self._read = read_model
        self._create_validator = validators["keypairs.create"]
        self._max_body = max_body_bytes

    def _owner(self, req: falcon.Request, rule: str) -> str:
        """Whose key pairs: the caller's, or from 2.10 an admin's ``?user_id=``."""
        actor: Actor = req.context.actor
        user_id = req.get_param("user_id") if versions.at_least(req, 10) else None
        if user_id and user_id != actor.user_id:
            auth.require_admin(actor, _POLICY % rule)
            return user_id
        return actor.user_id

    def _keypair(self, user_id: str, name: str) -> KeyPair:
        try:
            keypair = loaders.keypair(self._bus.uow, user_id, name)
            keypair.ensure_exists()
        except NotFound:
            raise ItemNotFound(f"Keypair {name} not found for user {user_id}") from None
        return keypair


def _typed(req: falcon.Request, key_type: str) -> dict[str, str]:
    """The key pair's ``type``, from microversion 2.2."""
    return {"type": key_type} if versions.at_least(req, 2) else {}


def _listed_view_of(req: falcon.Request) -> Callable[[Any], dict[str, Any]]:
    """A listed key pair (``queries.view_rows``) as a list shows it (its ``type`` from 2.2),
    settled once a page."""
    typed = versions.at_least(req, 2)

    def view(row: Any) -> dict[str, Any]:
        shown = {"name": row.name, "public_key": row.public_key, "fingerprint": row.fingerprint}
        if typed:
            shown["type"] = row.type
        return {"keypair": shown}

    return view


class KeyPairCollection(_KeyPairs):
    """``GET``/``POST /v2.1/os-keypairs``: list, create or import key pairs."""

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        user_id = self._owner(req, "index")
        paged = versions.at_least(req, 35)
        limit, marker = page_params(req) if paged else (MAX_LIMIT, None)  # Nova pages from 2.35
        with self._read.connection(req) as conn:
            rows = keypair_queries.list_keypairs(conn, user_id, limit=limit, marker=marker)
        view = _listed_view_of(req)
        body: dict[str, Any] = {"keypairs": [view(r) for r in rows]}
        links = next_links(req, "os-keypairs", rows, limit, id_key="name") if paged else []
        if links:
            body["keypairs_links"] = links
        resp.media = body

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        body = read_json(req, self._create_validator, self._max_body)["keypair"]
        for name, since in (("type", 2), ("user_id", 10)):
            if name in body and not versions.at_least(req, since):
                raise _unexpected(name)
        v292 = versions.at_least(req, 92)
        if not (_NAME_V292 if v292 else _NAME).match(body["name"]):
            raise BadRequest(
                f"Invalid input for field/attribute name. Value: {body['name'][:255]}. "
                "'name' does not match the allowed pattern"
            )
        if v292 and "public_key" not in body:
            raise BadRequest("Invalid input for field/attribute keypair. 'public_key' is a required property")
        user_id = body.get("user_id", actor.user_id)
        if user_id != actor.user_id:
            auth.require_admin(actor, _POLICY % "create")
        key_type = body.get("type", SSH)
        command = CreateKeyPair(
            user_id, body["name"], body.get("public_key"), actor.project_id, type=key_type
        )
        with acting(req.context.command):
            result = self._bus.handle(command)
        keypair = loaders.keypair(self._bus.uow, user_id, body["name"])
        view: dict[str, Any] = {
            "name": keypair.name,
            "public_key": keypair.public_key,
            "fingerprint": keypair.fingerprint,
            "user_id": keypair.user_id,
            **_typed(req, keypair.type),
        }
        if result.private_key is not None:
            view["private_key"] = result.private_key
        if versions.at_least(req, 2):
            resp.status = falcon.HTTP_201
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = {"keypair": view}


class KeyPairItem(_KeyPairs):
    """``GET``/``DELETE /v2.1/os-keypairs/{name}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        keypair = self._keypair(self._owner(req, "show"), name)
        resp.media = {
            "keypair": {
                "id": integer_id(keypair.id),
                "name": keypair.name,
                "public_key": keypair.public_key,
                "fingerprint": keypair.fingerprint,
                "user_id": keypair.user_id,
                "created_at": _time(keypair.modified_on),
                "updated_at": None,
                "deleted_at": None,
                "deleted": False,
                **_typed(req, keypair.type),
            }
        }

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        user_id = self._owner(req, "delete")
        self._keypair(user_id, name)
        with acting(req.context.command):
            result = self._bus.handle(DeleteKeyPair(user_id, name))
        resp.status = falcon.HTTP_204 if versions.at_least(req, 2) else falcon.HTTP_202
        resp.set_header(POSITION_HEADER, str(result.position))
