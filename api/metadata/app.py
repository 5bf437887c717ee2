"""The metadata service's WSGI app: every path is one sink, answered from the caller's own server.

``create_app(deps)`` takes its collaborators (the read-model pool, the user-data store, the password
store, the vendordata providers, the caller rules); ``MetadataApp`` composes them from the settings
on its first request, in the gunicorn worker that serves it (``processes/metadata.py``).
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import falcon
import psycopg
import psycopg_pool

from api.app import LazyApp
from api.metadata import lookup
from api.metadata.caller import ByInstance, Identifier, Refused
from api.metadata.passwords import MAX_SIZE, AlreadySet, PasswordError, PasswordStore, password_store
from api.metadata.telemetry import RequestMetrics
from api.readmodel import open_pool
from stratus.config import Settings
from stratus.imagestore import BlobStore, StoreError, user_data_store
from stratus.metadata.tree import EC2_VERSIONS, PASSWORD, TEXT, Guest, NotInTree, render
from stratus.metadata.vendordata import Providers, instance_context

log = logging.getLogger("stratus.metadata")

_REASONS = {
    400: falcon.HTTP_400, 403: falcon.HTTP_403, 404: falcon.HTTP_404, 405: falcon.HTTP_405,
    409: falcon.HTTP_409, 503: falcon.HTTP_503,
}  # fmt: skip


class _Answer(Exception):
    """An error answer: Nova's plain-text status and explanation."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Deps:
    """What the metadata app reads from and how it decides whom it answers."""

    pool: psycopg_pool.ConnectionPool
    settings: Settings
    identifier: Identifier
    providers: Providers
    user_data: BlobStore
    passwords: PasswordStore
    random_bytes: Callable[[int], bytes] = field(default=os.urandom)


def create_app(deps: Deps) -> falcon.App:
    app = falcon.App(media_type=TEXT, middleware=[RequestMetrics()])
    app.add_sink(Metadata(deps), prefix="/")
    return app


class Metadata:
    """Every path: identify the caller's server, find the path in its tree, answer it."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    def __call__(self, req: falcon.Request, resp: falcon.Response, **_: Any) -> None:
        try:
            self._answer(req, resp)
        except (_Answer, Refused) as e:
            resp.status = _REASONS[e.status]
            resp.content_type = TEXT
            resp.data = f"{resp.status}\n\n{e.message}\n".encode()

    def _answer(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.method not in ("GET", "HEAD", "POST"):
            raise _Answer(405, "GET and POST only are supported.")
        if req.path.strip("/") == "":  # the versions, before any caller is identified (as Nova)
            resp.content_type = TEXT
            resp.data = render([*EC2_VERSIONS, "latest"])
            return
        headers = {name.lower(): value for name, value in req.headers.items()}
        claim = self._deps.identifier.identify(headers, req.remote_addr or "")
        guest = self._guest(claim)
        try:
            data = guest.lookup(req.path)
        except NotInTree:
            raise _Answer(404, "The resource could not be found.") from None
        if data is PASSWORD:
            self._password(req, resp, guest)
            return
        if req.method == "POST":
            raise _Answer(405, "GET and POST only are supported.")
        resp.content_type = guest.mimetype
        resp.data = render(data)

    def _guest(self, claim: Any) -> Guest:
        d = self._deps
        with self._connection() as conn:
            if isinstance(claim, ByInstance):
                row = lookup.server_by_id(conn, claim.instance_id)
                if row is not None and row["project_id"] != claim.project_id:
                    log.warning("X-Tenant-ID does not match the project of server %s", claim.instance_id)
                    row = None
            else:
                row = lookup.server_by_address(conn, claim.address)
            if row is None:
                raise _Answer(404, "The resource could not be found.")
            keypair = lookup.keypair(conn, row)
        user_data = self._user_data(row)
        return Guest(
            row=row,
            keypair=keypair,
            user_data=user_data,
            dhcp_domain=d.settings.metadata_dhcp_domain,
            fixed_cidr=d.settings.fixed_network,
            vendordata=lambda g: d.providers.vendor_data2(instance_context(g.row, g.user_data, g.hostname)),
            static_vendordata=d.providers.vendor_data,
            random_bytes=d.random_bytes,
        )

    def _user_data(self, row: dict[str, Any]) -> bytes | None:
        filed = row.get("user_data")
        if not filed:
            return None
        blob = filed.get("id") or filed.get("sha256")  # rows projected before version 5: "sha256"
        try:
            return self._deps.user_data.get(str(blob))
        except StoreError as e:
            log.error("user data of server %s unreadable: %s", row["id"], e)
            raise _Answer(503, "The server's user data cannot be read right now; retry.") from e

    def _password(self, req: falcon.Request, resp: falcon.Response, guest: Guest) -> None:
        store = self._deps.passwords
        try:
            if req.method != "POST":
                resp.content_type = TEXT
                resp.data = store.get(guest.uuid) or b""
                return
            if guest.row.get("task_state") == "deleting":
                # The API removed any password at the delete request (api/server_password.py); a
                # post from the guest before its host destroys it would outlive the server.
                raise _Answer(409, "There was a conflict when trying to complete your request.")
            if store.get(guest.uuid) is not None:
                raise _Answer(409, "There was a conflict when trying to complete your request.")
            if (req.content_length or 0) > MAX_SIZE:
                raise _Answer(400, "Request is too large.")
            body = req.bounded_stream.read(MAX_SIZE + 1)
            if len(body) > MAX_SIZE:
                raise _Answer(400, "Request is too large.")
            store.set_once(guest.uuid, body)
        except AlreadySet:
            raise _Answer(409, "There was a conflict when trying to complete your request.") from None
        except PasswordError as e:
            log.error("password of server %s: %s", guest.uuid, e)
            raise _Answer(503, "The password cannot be kept right now; retry.") from e
        resp.content_type = TEXT
        resp.data = b""

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._deps.pool.connection() as conn:
                yield conn
        except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as e:
            log.error("read model unreachable: %s", e)
            raise _Answer(503, "The metadata service cannot read its data right now; retry.") from e


def build(settings: Settings) -> tuple[Deps, Callable[[], None]]:
    """The collaborators ``settings`` name, and how to close them."""
    secret = (
        settings.metadata_proxy_key_file.read_bytes().strip() if settings.metadata_proxy_key_file else None
    )
    providers = Providers.configured(settings)
    pool = open_pool(settings.database_url or "", max_size=max(2, settings.metadata_threads))
    deps = Deps(
        pool=pool,
        settings=settings,
        identifier=Identifier(secret or None, settings.metadata_source_address),
        providers=providers,
        user_data=user_data_store(settings.data_dir),
        passwords=password_store(settings.data_dir),
    )
    return deps, pool.close


class MetadataApp(LazyApp):
    """The API's lazy WSGI app, composing the metadata service's app in place of the API's: on its
    first request, in the gunicorn worker that serves it (503 until it can)."""

    answers_probes = False  # guests call it: it shows them nothing of the control plane's

    def _compose(self) -> falcon.App:
        with self._lock:
            if self._app is None:
                deps, close = build(self._settings_factory())
                atexit.register(close)
                self._app = create_app(deps)
            return self._app
