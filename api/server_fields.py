"""``/v2.1/servers/{id}/metadata`` and ``/v2.1/servers/{id}/tags``: a server's own items, in Nova's shapes.

Every change is a command, recorded as an event on the server (``X-Stratus-Position`` says where).
Reads and the bodies answered after a change come from the server's aggregate in the log, so a
client always sees its own change at once.
"""

from __future__ import annotations

from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import auth
from api.body import read_json
from api.errors import BadRequest, ItemNotFound
from api.readmodel import POSITION_HEADER
from api.versions import since
from commands import loaders
from commands.bus import MessageBus
from commands.instance import Instance
from commands.servers.fields import (
    AddServerTag,
    DeleteServerMetadataItem,
    RemoveServerTag,
    SetServerMetadata,
    SetServerTags,
)
from commands.unit_of_work import Result
from stratus.context import Actor, acting

MAX_TAG_LENGTH = 60


class _Fields:
    def __init__(
        self, bus: MessageBus, validators: dict[str, Draft202012Validator], max_body_bytes: int
    ) -> None:
        self._bus = bus
        self._validators = validators
        self._max_body = max_body_bytes

    def _scope(self, req: falcon.Request) -> str | None:
        actor: Actor = req.context.actor
        return auth.server_scope(actor)

    def _server(self, req: falcon.Request, server_id: str) -> Instance:
        return loaders.instance(self._bus.uow, server_id, self._scope(req))

    def _body(self, req: falcon.Request, schema: str) -> dict[str, Any]:
        return read_json(req, self._validators[schema], self._max_body)

    @staticmethod
    def _written(resp: falcon.Response, result: Result) -> None:
        resp.set_header(POSITION_HEADER, str(result.position))


class Metadata(_Fields):
    """``GET``/``PUT`` (replace all)/``POST`` (set some) ``/servers/{id}/metadata``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        resp.media = {"metadata": self._server(req, server_id).metadata}

    def on_put(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        self._set(req, resp, server_id, replace=True)

    def on_post(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        self._set(req, resp, server_id, replace=False)

    def _set(self, req: falcon.Request, resp: falcon.Response, server_id: str, *, replace: bool) -> None:
        items = self._body(req, "servers.metadata")["metadata"]
        with acting(req.context.command):
            result = self._bus.handle(SetServerMetadata(server_id, self._scope(req), items, replace))
        self._written(resp, result)
        resp.media = {"metadata": self._server(req, server_id).metadata}


class MetadataItem(_Fields):
    """``GET``/``PUT``/``DELETE /servers/{id}/metadata/{key}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str, key: str) -> None:
        metadata = self._server(req, server_id).metadata
        if key not in metadata:
            raise ItemNotFound("Metadata item was not found")
        resp.media = {"meta": {key: metadata[key]}}

    def on_put(self, req: falcon.Request, resp: falcon.Response, server_id: str, key: str) -> None:
        meta = self._body(req, "servers.metadata_item")["meta"]
        if key not in meta:
            raise BadRequest("Request body and URI mismatch")
        with acting(req.context.command):
            result = self._bus.handle(SetServerMetadata(server_id, self._scope(req), meta))
        self._written(resp, result)
        resp.media = {"meta": meta}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str, key: str) -> None:
        with acting(req.context.command):
            result = self._bus.handle(DeleteServerMetadataItem(server_id, self._scope(req), key))
        self._written(resp, result)
        resp.status = falcon.HTTP_204


@falcon.before(since(26))
class Tags(_Fields):
    """``GET``/``PUT`` (replace)/``DELETE`` (all) ``/servers/{id}/tags``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        resp.media = {"tags": self._server(req, server_id).tags}

    def on_put(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        tags = self._body(req, "servers.tags")["tags"]
        with acting(req.context.command):
            result = self._bus.handle(SetServerTags(server_id, self._scope(req), tuple(tags)))
        self._written(resp, result)
        resp.media = {"tags": self._server(req, server_id).tags}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        with acting(req.context.command):
            result = self._bus.handle(SetServerTags(server_id, self._scope(req), ()))
        self._written(resp, result)
        resp.status = falcon.HTTP_204


@falcon.before(since(26))
class Tag(_Fields):
    """``GET`` (204 or 404)/``PUT`` (201 added, 204 already there)/``DELETE /servers/{id}/tags/{tag}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str, tag: str) -> None:
        if tag not in self._server(req, server_id).tags:
            raise ItemNotFound(f"Tag {tag} could not be found.")
        resp.status = falcon.HTTP_204

    def on_put(self, req: falcon.Request, resp: falcon.Response, server_id: str, tag: str) -> None:
        if not 1 <= len(tag) <= MAX_TAG_LENGTH or "," in tag or "/" in tag:
            raise BadRequest(f"Invalid tag: 1 to {MAX_TAG_LENGTH} characters, without ',' or '/'.")
        with acting(req.context.command):
            result = self._bus.handle(AddServerTag(server_id, self._scope(req), tag))
        self._written(resp, result)
        resp.status = falcon.HTTP_201 if result.added else falcon.HTTP_204
        resp.location = req.url

    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str, tag: str) -> None:
        with acting(req.context.command):
            result = self._bus.handle(RemoveServerTag(server_id, self._scope(req), tag))
        self._written(resp, result)
        resp.status = falcon.HTTP_204
