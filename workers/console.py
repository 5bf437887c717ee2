"""The host's answer to ``os-getConsoleOutput``: the tail of a guest's serial console log.

Guests write their serial console to ``<instances path>/<uuid>/console.log`` (the domain XML says
so). The hypervisor worker answers the API's question over core NATS (``stratus.hostrpc``) from
that file: no database, no log, no libvirt call. The answer is capped so it fits one NATS message.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

from stratus.hostrpc import MAX_OUTPUT_BYTES, NOT_FOUND, HostRefused


def console_log(instances_path: Path, server_id: str) -> Path:
    return instances_path / server_id / "console.log"


def tail(data: bytes, lines: int | None) -> str:
    """The last ``lines`` lines (all when None), at most ``MAX_OUTPUT_BYTES``, as text."""
    text = data.decode("utf-8", errors="replace")
    if lines is not None:
        kept = text.splitlines(keepends=True)[-lines:] if lines > 0 else []
        text = "".join(kept)
    encoded = text.encode()
    if len(encoded) > MAX_OUTPUT_BYTES:
        text = encoded[-MAX_OUTPUT_BYTES:].decode("utf-8", errors="ignore")
    return text


def answerer(instances_path: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        raw = body.get("server_id")
        try:
            server_id = str(UUID(str(raw)))  # a UUID, never a path
        except ValueError:
            raise HostRefused(NOT_FOUND, f"No guest {raw!s:.40} on this host") from None
        length = body.get("length")
        path = console_log(instances_path, server_id)
        try:
            # Read at most a little more than we send: the log of a long-lived guest can be large.
            with path.open("rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - 4 * MAX_OUTPUT_BYTES))
                data = f.read()
        except FileNotFoundError:
            raise HostRefused(NOT_FOUND, f"Guest {server_id} has no console log on this host") from None
        return {"output": tail(data, int(length) if isinstance(length, int) else None)}

    return answer
