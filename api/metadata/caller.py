"""Who is asking: which server a metadata request is for, decided as Nova's handler decides it.

Behind a proxy (Neutron's metadata agent, or any that holds the shared secret), the request names
the server in ``X-Instance-ID``, its project in ``X-Tenant-ID``, and signs the id with
``X-Instance-ID-Signature``: HMAC-SHA256 of the id under the secret, in hex. A missing or wrong
signature is 403; a project that is not the server's makes the server not found (404), so one
project's proxy can never read another's guest. Without those headers, and where the settings allow
it, the caller's address (the connection's, or the first of ``X-Forwarded-For`` from a trusted
proxy) is looked up among the servers' fixed addresses.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass


class Refused(Exception):
    """The caller cannot be believed or identified: ``status`` (400 or 403) and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ByInstance:
    """A proxy vouched for the server ``instance_id`` of project ``project_id``."""

    instance_id: str
    project_id: str


@dataclass(frozen=True)
class ByAddress:
    """The caller is whichever server has the fixed address ``address``."""

    address: str


def signature(secret: bytes, instance_id: str) -> str:
    """What a proxy sends as ``X-Instance-ID-Signature`` for ``instance_id``."""
    return hmac.new(secret, instance_id.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Identifier:
    """The deployment's rules: the proxy's secret (None: no proxied request is believed) and how a
    caller's address may name it (``off``, ``peer``, ``forwarded``)."""

    secret: bytes | None
    source_address: str

    def identify(self, headers: dict[str, str], peer: str) -> ByInstance | ByAddress:
        """``headers`` in lower case; ``peer``: the connection's remote address."""
        instance_id = headers.get("x-instance-id")
        if instance_id is not None or (self.secret is not None and self.source_address == "off"):
            return self._vouched(instance_id, headers)
        if self.source_address == "peer" and peer:
            return ByAddress(peer)
        if self.source_address == "forwarded" and headers.get("x-forwarded-for"):
            return ByAddress(headers["x-forwarded-for"].split(",")[0].strip())
        raise Refused(403, "The caller cannot be identified.")

    def _vouched(self, instance_id: str | None, headers: dict[str, str]) -> ByInstance:
        given = headers.get("x-instance-id-signature")
        project_id = headers.get("x-tenant-id")
        if instance_id is None:
            raise Refused(400, "X-Instance-ID header is missing from request.")
        if (
            self.secret is None
            or not given
            or not hmac.compare_digest(signature(self.secret, instance_id), given)
        ):
            raise Refused(403, "Invalid proxy request signature.")
        if project_id is None:
            raise Refused(400, "X-Tenant-ID header is missing from request.")
        return ByInstance(instance_id, project_id)
