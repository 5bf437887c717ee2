"""``/v2.1/os-keypairs``: a user's SSH key pairs, in Nova's shapes per microversion.

From 2.2 a key pair has a ``type`` (``ssh``: Stratus keeps no x509 certificates), create answers
201 and delete 204; from 2.10 an admin may name the ``user_id`` whose key pair it is.

Key pairs belong to the calling user. ``POST`` with a ``public_key`` imports it; without one,
Stratus generates an RSA key pair and answers its private key this once: it is never stored,
logged or recorded in an event. The fingerprint is Nova's (MD5 of the key blob, colon hex).
"""

from __future__ import annotations

from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import auth, versions
from api.body import read_json
from api.errors import BadRequest, ItemNotFound
from api.links import page_params
from api.readmodel import POSITION_HEADER, ReadModel
from commands.catalog import CatalogHandlers, CreateKeyPair, DeleteKeyPair
from commands.errors import NotFound
from commands.keypair import KeyPair
from projections import catalog_queries
from stratus.context import Actor, acting


def _typed(req: falcon.Request) -> dict[str, str]:
    """The key pair's ``type``, from microversion 2.2."""
    return {"type": "ssh"} if versions.at_least(req, 2) else {}


def _time(value: Any) -> str | None:
    return None if value is None else value.replace(tzinfo=None).isoformat()


class _KeyPairs:
    def __init__(
        self,
        catalog: CatalogHandlers,
        read_model: ReadModel,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
    ) -> None:
        self._catalog = catalog
        self._read = read_model
        self._create_validator = validators["keypairs.create"]
        self._max_body = max_body_bytes


class KeyPairCollection(_KeyPairs):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        limit, marker = page_params(req)
        with self._read.connection(req) as conn:
            rows = catalog_queries.list_keypairs(conn, actor.user_id, limit=limit, marker=marker)
        resp.media = {
            "keypairs": [
                {
                    "keypair": {
                        "name": r["name"],
                        "public_key": r["public_key"],
                        "fingerprint": r["fingerprint"],
                        **_typed(req),
                    }
                }
                for r in rows
            ]
        }

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        body = read_json(req, self._create_validator, self._max_body)["keypair"]
        for name, since in (("type", 2), ("user_id", 10)):
            if name in body and not versions.at_least(req, since):
                raise BadRequest(
                    f"Invalid input for field/attribute keypair. Additional properties are not allowed "
                    f"({name!r} was unexpected)"
                )
        if body.get("type", "ssh") != "ssh":
            raise BadRequest("Keypair type x509 is not supported: Stratus keeps SSH key pairs only.")
        user_id = body.get("user_id", actor.user_id)
        if user_id != actor.user_id:
            auth.require_admin(actor, "os_compute_api:os-keypairs:create")
        command = CreateKeyPair(user_id, body["name"], body.get("public_key"), actor.project_id)
        with acting(req.context.command):
            result = self._catalog.create_keypair(command)
        keypair = self._catalog.keypair(user_id, body["name"])
        view: dict[str, Any] = {
            "name": keypair.name,
            "public_key": keypair.public_key,
            "fingerprint": keypair.fingerprint,
            "user_id": keypair.user_id,
            **_typed(req),
        }
        if result.private_key is not None:
            view["private_key"] = result.private_key
        if versions.at_least(req, 2):
            resp.status = falcon.HTTP_201
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = {"keypair": view}


class KeyPairItem(_KeyPairs):
    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        actor: Actor = req.context.actor
        keypair = self._keypair(actor, name)
        resp.media = {
            "keypair": {
                "name": keypair.name,
                "public_key": keypair.public_key,
                "fingerprint": keypair.fingerprint,
                "user_id": keypair.user_id,
                "created_at": _time(keypair.modified_on),
                "updated_at": None,
                "deleted_at": None,
                "deleted": False,
                **_typed(req),
            }
        }

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        actor: Actor = req.context.actor
        self._keypair(actor, name)
        with acting(req.context.command):
            result = self._catalog.delete_keypair(DeleteKeyPair(actor.user_id, name))
        resp.status = falcon.HTTP_204 if versions.at_least(req, 2) else falcon.HTTP_202
        resp.set_header(POSITION_HEADER, str(result.position))

    def _keypair(self, actor: Actor, name: str) -> KeyPair:
        try:
            return self._catalog.keypair(actor.user_id, name)
        except NotFound:
            raise ItemNotFound(f"Keypair {name} not found for user {actor.user_id}") from None
