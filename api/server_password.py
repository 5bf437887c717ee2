"""``/v2.1/servers/{server_id}/os-server-password``: the owner reads or clears the password a guest posted.

Nova's ``server_password.py``, at every microversion: ``GET`` answers 200 ``{"password": "..."}``,
the encrypted password the guest posted to the metadata service (``""`` before it did); ``DELETE``
answers 204 and forgets it, so the guest's agent may post again (the guest's own password is not
changed). Policies as Nova's: ``os_compute_api:os-server-password:show`` (project reader or admin)
and ``:clear`` (project member or admin). An unknown server, a deleted one or another project's
(for a non-admin) is 404, as Nova's ``common.get_instance``.

The password is not on the log: it is in the metadata service's store
(``api/metadata/passwords.py``), the ``<data dir>`` the API shares with the metadata service.

The API also removes it when a server's deletion is requested (``forget_on_delete``): every deletion
of a server enters through the API (``DELETE /servers/{id}`` and the ``forceDelete`` action), is
never taken back (there is no soft delete), and the API is the process that shares the data
directory with the metadata service in every deployment that serves passwords. A hypervisor worker
would miss the servers that have no host when deleted (a shelved-offloaded server's guest may have
posted one) and may run on a machine of its own. A removal that fails is logged and leaves the
deletion as it is.
"""

from __future__ import annotations

import logging

import falcon

from api import auth, policy
from api.errors import ServiceUnavailable
from api.metadata.passwords import PasswordError, PasswordStore
from commands import loaders
from commands.unit_of_work import UnitOfWork
from stratus.context import Actor

log = logging.getLogger("stratus.api")


class ServerPassword:
    """``GET`` and ``DELETE /v2.1/servers/{server_id}/os-server-password``."""

    def __init__(self, uow: UnitOfWork, passwords: PasswordStore) -> None:
        self._uow = uow
        self._passwords = passwords

    def _server(self, req: falcon.Request, server_id: str, rule: str) -> str:
        """The server's id once it is the caller's to see (404) and ``rule`` allows the caller (403)."""
        actor: Actor = req.context.actor
        inst = loaders.instance(self._uow, server_id, auth.server_scope(actor))
        policy.authorize(actor, rule, project_id=inst.project_id)
        return str(inst.id)

    @falcon.before(policy.require("os_compute_api:os-server-password:show"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        server = self._server(req, server_id, "os_compute_api:os-server-password:show")
        try:
            posted = self._passwords.get(server)
        except PasswordError as e:
            log.error("password of server %s unreadable: %s", server, e)
            raise ServiceUnavailable("The server's password cannot be read right now; retry.") from e
        resp.media = {"password": (posted or b"").decode("utf-8", errors="replace")}

    @falcon.before(policy.require("os_compute_api:os-server-password:clear"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        server = self._server(req, server_id, "os_compute_api:os-server-password:clear")
        try:
            self._passwords.clear(server)
        except PasswordError as e:
            log.error("password of server %s cannot be cleared: %s", server, e)
            raise ServiceUnavailable("The server's password cannot be cleared right now; retry.") from e
        resp.status = falcon.HTTP_204


def forget_on_delete(passwords: PasswordStore | None, server_id: str) -> None:
    """Remove a server's posted password once its deletion was recorded. The deletion stands whatever
    happens here: a file that cannot be removed is logged (an operator removes it), never raised."""
    if passwords is None:
        return
    try:
        passwords.clear(server_id)
    except PasswordError as e:
        log.error("server %s deleted, but its posted password could not be removed: %s", server_id, e)
