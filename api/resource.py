"""The collaborators a compute admin resource receives, once: what they share, not what they serve.

Flavor extra specs, quota sets, server groups and host aggregates each send their commands to the
process's message bus (``commands.bus``), read the read model, and validate request bodies against
``schemas/api/``. ``create_app`` hands each the same four collaborators; this base keeps them and
reads a body against a named schema.
"""

from __future__ import annotations

from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api.body import read_json
from api.readmodel import ReadModel
from commands.bus import MessageBus


class BusResource:
    """A resource that sends commands to the bus and reads bodies validated by name."""

    def __init__(
        self,
        bus: MessageBus,
        read_model: ReadModel,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
    ) -> None:
        self._bus = bus
        self._read = read_model
        self._validators = validators
        self._max_body = max_body_bytes

    def _body(self, req: falcon.Request, schema: str) -> Any:
        """The request's JSON body, bounded in size and valid against the schema named ``schema``."""
        return read_json(req, self._validators[schema], self._max_body)
