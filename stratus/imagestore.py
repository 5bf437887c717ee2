"""Where image data and user data live: files on local disk, named by what they contain.

The log records an image's size, MD5 ``checksum`` and SHA-256 ``os_hash_value``, never its bytes;
the bytes are here, at ``<root>/<image id>/<sha256>``. Because the name is the content's hash, two
uploads racing for one image never overwrite each other's file, and the hash in the log finds the
file the event describes. An upload is written to a temporary file in the image's directory,
hashed while it streams, and renamed into place only when complete.

User data (a server's ``user_data``) is kept apart, at ``<root>/<random id>``, so that only that id
and its size enter the log: no digest, which would let a reader of the log confirm a guess of the
data (it often carries secrets).

Every process that reads these files (the API serving downloads, each hypervisor worker booting a
kernel) must see the same directory: one machine's data dir, or a shared filesystem.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

CHUNK = 1024 * 1024
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_SAFE_ID = re.compile(r"^[0-9A-Za-z-]{1,64}$")


class StoreError(Exception):
    """The store cannot take or give data (disk full, permissions, a missing file)."""


class TooLarge(StoreError):
    """An upload went past its limit (the quota left, or the store's largest image)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Image exceeds the storage quota of {limit} bytes.")
        self.limit = limit


@dataclass(frozen=True)
class StoredData:
    """Data written in place: its size, MD5 and SHA-256, and the file that holds it."""

    size: int
    md5: str
    sha256: str
    path: Path


def _checked_id(image_id: str) -> str:
    if not _SAFE_ID.match(image_id):
        raise StoreError(f"not an image id: {image_id[:80]!r}")
    return image_id


class ImageStore:
    """Image and user data as files under ``root``, named by image id and content hash."""

    def __init__(self, root: Path, *, max_size: int = 1 << 40) -> None:
        self.root = root
        self.max_size = max_size

    def path(self, image_id: str, sha256: str) -> Path:
        if not _HEX64.match(sha256):
            raise StoreError(f"not a sha256: {sha256[:80]!r}")
        return self.root / _checked_id(image_id) / sha256

    def receive(self, image_id: str, chunks: Iterable[bytes], limit: int | None = None) -> StoredData:
        """Write ``chunks`` for ``image_id``, hashing as they come; the complete file is in place after.

        ``limit``: at most this many bytes (a quota's remainder): past it, ``TooLarge`` and nothing
        is left on disk."""
        most = self.max_size if limit is None else min(limit, self.max_size)
        directory = self.root / _checked_id(image_id)
        md5 = hashlib.md5(usedforsecurity=False)
        sha256 = hashlib.sha256()
        size = 0
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".upload-")
        except OSError as e:
            raise StoreError(f"cannot write to the image store: {e.strerror}") from e
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    size += len(chunk)
                    if size > most:
                        raise TooLarge(most)
                    md5.update(chunk)
                    sha256.update(chunk)
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            final = directory / sha256.hexdigest()
            os.replace(tmp, final)
        except OSError as e:
            Path(tmp).unlink(missing_ok=True)
            raise StoreError(f"cannot write to the image store: {e.strerror}") from e
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return StoredData(size, md5.hexdigest(), sha256.hexdigest(), final)

    def read(self, image_id: str, sha256: str, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """The image's bytes, in chunks (``StoreError`` if the file is missing)."""
        try:
            f = self.path(image_id, sha256).open("rb")
        except OSError as e:
            raise StoreError(f"image data of {image_id} is missing from the store: {e.strerror}") from e
        return _chunks(f, chunk_size)

    def discard(self, image_id: str, sha256: str) -> None:
        """Remove one stored upload (one that was not recorded in the log)."""
        self.path(image_id, sha256).unlink(missing_ok=True)

    def remove(self, image_id: str) -> None:
        """Remove everything stored for the image (after its deletion was recorded)."""
        shutil.rmtree(self.root / _checked_id(image_id), ignore_errors=True)


def _chunks(f: BinaryIO, chunk_size: int) -> Iterator[bytes]:
    with f:
        while chunk := f.read(chunk_size):
            yield chunk


class BlobStore:
    """Small blobs (user data), each filed under a random id that ``put`` returns.

    Not content-addressed: the id goes into the log, and a digest there would let anyone who reads
    the log confirm a guess of the data (user data often holds secrets)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, data: bytes) -> str:
        blob = secrets.token_hex(32)
        final = self.root / blob
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".blob-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o600)
            os.replace(tmp, final)
        except OSError as e:
            raise StoreError(f"cannot write to the blob store: {e.strerror}") from e
        return blob

    def get(self, blob: str) -> bytes:
        if not _HEX64.match(blob):
            raise StoreError(f"not a blob id: {blob[:80]!r}")
        try:
            return (self.root / blob).read_bytes()
        except OSError as e:
            raise StoreError(f"blob {blob} is missing: {e.strerror}") from e


def user_data_store(data_dir: Path) -> BlobStore:
    """Where servers' user data is filed: the API files it, the metadata service and the hypervisor
    worker (for the config drive) read it."""
    return BlobStore(data_dir / "user_data")
