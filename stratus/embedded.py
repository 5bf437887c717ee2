"""What the embedded servers (NATS, PostgreSQL) share: a ``with`` block starts one and closes it.

Each server says for itself how it starts and stops; ``close`` is ``stop`` unless the server has
more to clean up (NATS removes its private ports directory).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self


class EmbeddedServer:
    """A server this process starts and stops: ``with server:`` runs it for the block."""

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop the server (a server with more to clean up says so)."""
        self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
