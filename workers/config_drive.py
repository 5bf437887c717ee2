"""The config drive: a server's metadata on an ISO 9660 disk (label ``config-2``), as Nova's.

A guest that cannot (or would rather not) reach 169.254.169.254 reads the same trees from a cdrom:
``openstack/<version>/meta_data.json``, ``user_data``, ``network_data.json``, ``vendor_data*.json``
and ``ec2/<version>/meta-data.json``, ``user-data`` (``stratus.metadata.tree.config_drive_files``).

The hypervisor worker writes it at spawn, to ``<instances path>/<uuid>/disk.config`` (Nova's name),
from what the log records of the server (its ``Instance`` aggregate, its host's zone, its key pair)
and the user-data store; it never reads the read models. The image is made with pycdlib (no
genisoimage binary), with Rock Ridge and Joliet names, so a guest sees ``meta_data.json`` and not
an ISO 9660 ``META_DATA.JSON;1``. The drive is a snapshot of the server at spawn, as Nova's is.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

import pycdlib
from pycdlib.pycdlibexception import PyCdlibException

from commands import loaders
from commands.bus import MessageBus
from commands.errors import NotFound
from commands.host_aggregate import DEFAULT_ZONE
from commands.instance import Instance
from stratus.imagestore import BlobStore, StoreError
from stratus.metadata.tree import Guest, config_drive_files
from stratus.metadata.vendordata import Providers, instance_context
from workers.virt import CONFIG_DRIVE_NAME, PermanentVirtError, TemporaryVirtError

LABEL = "config-2"
_NOT_D1 = re.compile(r"[^A-Z0-9_]")


class ConfigDrives:
    """Build a server's config drive from the log, and remove it with the guest."""

    def __init__(
        self,
        bus: MessageBus,
        *,
        instances_path: Path,
        user_data: BlobStore,
        providers: Providers,
        dhcp_domain: str = "",
        fixed_cidr: str = "",
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self._bus = bus
        self._instances_path = instances_path
        self._user_data = user_data
        self._providers = providers
        self._dhcp_domain = dhcp_domain
        self._fixed_cidr = fixed_cidr
        self._random_bytes = random_bytes

    def path(self, server_id: str) -> Path:
        return self._instances_path / server_id / CONFIG_DRIVE_NAME

    def build(self, inst: Instance) -> str | None:
        """The absolute path of the server's config drive, written now; None when it has none."""
        if not inst.config_drive:
            return None
        path = self.path(inst.server_id)
        try:
            write_iso(path, config_drive_files(self.guest(inst)))
        except PermissionError as e:
            raise PermanentVirtError(f"Cannot write the config drive {path}: {e}") from e
        except OSError as e:
            raise TemporaryVirtError(f"Cannot write the config drive {path}: {e}") from e
        return str(path.absolute())  # libvirtd runs elsewhere: a relative path means nothing to it

    def remove(self, server_id: str) -> None:
        """Delete the server's config drive (nothing to do when it has none)."""
        try:
            self.path(server_id).unlink(missing_ok=True)
        except OSError as e:
            raise TemporaryVirtError(f"Cannot remove the config drive of {server_id}: {e}") from e

    def guest(self, inst: Instance) -> Guest:
        """The metadata trees' view of the server, from its aggregate (the read model's row shape)."""
        row = {
            "id": inst.server_id, "name": inst.name, "hostname": inst.hostname,
            "project_id": inst.project_id, "metadata": dict(inst.metadata), "ports": list(inst.ports),
            "availability_zone": inst.availability_zone, "host": inst.host, "host_zone": self._zone(inst),
            "launch_index": inst.launch_index, "image_ref": inst.image_ref, "image": inst.image or {},
            "reservation_id": inst.reservation_id, "key_name": inst.key_name, "flavor": inst.flavor,
        }  # fmt: skip
        user_data = self._read_user_data(inst)
        providers = self._providers
        return Guest(
            row=row,
            keypair=self._keypair(inst),
            user_data=user_data,
            dhcp_domain=self._dhcp_domain,
            fixed_cidr=self._fixed_cidr,
            vendordata=lambda g: providers.vendor_data2(instance_context(g.row, g.user_data, g.hostname)),
            static_vendordata=providers.vendor_data,
            random_bytes=self._random_bytes,
        )

    def _zone(self, inst: Instance) -> str | None:
        if not inst.host:
            return None
        try:
            return loaders.host(self._bus.uow, inst.host).availability_zone(DEFAULT_ZONE)
        except NotFound:
            return None

    def _keypair(self, inst: Instance) -> dict[str, Any] | None:
        """The key pair as the server recorded it at create (Nova keeps a copy with the instance);
        its type from the key pair itself while it exists."""
        if not inst.key_name or not inst.key_data:
            return None
        try:
            key_type = loaders.keypair(self._bus.uow, inst.user_id, inst.key_name).type
        except NotFound:
            key_type = "ssh"
        return {"name": inst.key_name, "public_key": inst.key_data, "type": key_type}

    def _read_user_data(self, inst: Instance) -> bytes | None:
        filed = inst.user_data
        if not filed:
            return None
        try:
            return self._user_data.get(str(filed["id"]))
        except StoreError as e:
            raise TemporaryVirtError(f"The user data of {inst.server_id} cannot be read: {e}") from e


def write_iso(path: Path, files: Iterable[tuple[str, bytes]]) -> None:
    """An ISO 9660 image at ``path`` labelled ``config-2`` holding ``files`` (POSIX paths), written
    to a temporary file and renamed into place, so a crash never leaves half an image behind."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, vol_ident=LABEL, joliet=3, rock_ridge="1.09")
    made: set[str] = set()
    try:
        for name, data in files:
            parts = PurePosixPath(name).parts
            for depth in range(1, len(parts)):
                directory = "/".join(parts[:depth])
                if directory not in made:
                    iso.add_directory(
                        _iso_path(parts[:depth]), rr_name=parts[depth - 1], joliet_path=f"/{directory}"
                    )
                    made.add(directory)
            iso.add_fp(
                io.BytesIO(data),
                len(data),
                _iso_path(parts) + ";1",
                rr_name=parts[-1],
                joliet_path=f"/{name}",
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".disk.config.")
        os.close(fd)
        try:
            iso.write(tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except PyCdlibException as e:
        raise PermanentVirtError(f"Cannot make the config drive {path}: {e}") from e
    finally:
        iso.close()


def _iso_path(parts: tuple[str, ...]) -> str:
    """The plain ISO 9660 name (level 3: upper-case letters, digits, ``_`` and one dot) beside the
    Rock Ridge and Joliet names a guest sees: ``openstack/2012-08-10`` is ``/OPENSTACK/2012_08_10``."""
    names = []
    for part in parts:
        stem, dot, ext = part.upper().rpartition(".") if "." in part else (part.upper(), "", "")
        names.append(_NOT_D1.sub("_", stem) + dot + _NOT_D1.sub("_", ext))
    return "/" + "/".join(names)
