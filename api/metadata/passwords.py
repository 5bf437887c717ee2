"""The password a guest posts once to ``/openstack/<version>/password`` (Nova's password.py).

A guest agent (cloudbase-init, say) posts its administrator password encrypted with the server's
public key; the owner reads it back and decrypts it. Nova keeps it in the server's system
metadata; Stratus keeps it off the log, as it keeps user data (it is a secret, and the log is
forever): one file per server under ``<data dir>/metadata_passwords``, created exclusively, so the
first post wins and any later one is a conflict, across every process sharing the directory.

The metadata service keeps and reads it; the API reads it for the owner (``os-server-password``),
clears it on the owner's request (the guest may then post again) and removes it when the server's
deletion is requested (``api/server_password.py``).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

# Nova's limit: four system-metadata chunks of 255 characters.
MAX_SIZE = 4 * 255
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class PasswordError(Exception):
    """The password cannot be read or kept (disk, permissions)."""


class AlreadySet(Exception):
    """The server's password was posted before: Nova's 409."""


def password_store(data_dir: Path) -> PasswordStore:
    """Where servers' posted passwords are kept: the metadata service and the API share it."""
    return PasswordStore(data_dir / "metadata_passwords")


class PasswordStore:
    """Servers' posted passwords, one file each, named by the server's id."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, server_id: str) -> Path:
        if not _UUID.match(server_id):
            raise PasswordError(f"not a server id: {server_id[:80]!r}")
        return self.root / server_id

    def get(self, server_id: str) -> bytes | None:
        try:
            return self._path(server_id).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise PasswordError(str(e)) from e

    def set_once(self, server_id: str, password: bytes) -> None:
        """Keep ``password``; ``AlreadySet`` if the server has one. The file appears whole or not at
        all: written under a name of its own (mode 0600), then linked to the server's name, which
        fails if another post got there first (a reader never sees a half-written password)."""
        path = self._path(server_id)
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, staged = tempfile.mkstemp(dir=self.root, prefix=f".{server_id}.")  # 0600
        except OSError as e:
            raise PasswordError(str(e)) from e
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(password)
            os.link(staged, path)
        except FileExistsError:
            raise AlreadySet(server_id) from None
        except OSError as e:
            raise PasswordError(str(e)) from e
        finally:
            with contextlib.suppress(OSError):
                os.unlink(staged)

    def clear(self, server_id: str) -> None:
        """Forget the server's password (none: nothing to do); a guest may post one again."""
        try:
            self._path(server_id).unlink(missing_ok=True)
        except OSError as e:
            raise PasswordError(str(e)) from e
