"""The metadata network a hypervisor worker gives its guests, so that they read their own metadata
at 169.254.169.254 (docs/metadata.md, "How a guest reaches 169.254.169.254").

Each guest gets a NIC on QEMU's user-mode network (slirp) over the link-local range, isolated from
the host (``restrict=on``: no packet of the guest reaches the host or beyond), with one forward:
each TCP connection the guest opens to 169.254.169.254:80 is handed to a new ``stratus
metadata-proxy`` on its standard input and output (QEMU's ``guestfwd``), which signs the
server's own id and relays the request to the metadata service. The proxy is started by QEMU, in
QEMU's scrubbed environment: its command carries what it needs (where Stratus's code is, the proxy
key file, the service's address). This module says what the command is; the libvirt driver puts it
into the domain, on a real QEMU host only (``workers.libvirt_driver``).

Enabled by ``STRATUS_METADATA_GUEST_NETWORK=user`` (default ``off``: guests have no network).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from stratus.config import Settings

# Where Stratus's packages are imported from: the proxy QEMU starts imports the same code.
CODE_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class MetadataNetwork:
    """How this host's guests reach the metadata service: the proxy command for each guest."""

    key_file: Path  # the key the proxy signs with (Nova's metadata_proxy_shared_secret)
    service: str | None = None  # the service's host:port; None: the proxy's default (127.0.0.1:8780)
    python: str = sys.executable
    code_root: Path = CODE_ROOT

    @classmethod
    def configured(cls, settings: Settings) -> MetadataNetwork | None:
        """The network ``settings`` ask for; None when off. ``user`` without a proxy key file is a
        misconfiguration the worker refuses to start with (no guest could be answered)."""
        if settings.metadata_guest_network == "off":
            return None
        if settings.metadata_proxy_key_file is None:
            raise ValueError(
                "STRATUS_METADATA_GUEST_NETWORK=user needs STRATUS_METADATA_PROXY_KEY_FILE "
                "(the key the guests' metadata proxy signs with)"
            )
        return cls(key_file=settings.metadata_proxy_key_file.absolute(), service=settings.metadata_bind)

    def proxy_command(self, server_id: str, project_id: str) -> tuple[str, ...]:
        """The argv QEMU runs for each connection of the server's guest to 169.254.169.254:80."""
        service = ("--service", self.service) if self.service else ()
        return (
            "env",
            f"PYTHONPATH={self.code_root}",
            f"STRATUS_METADATA_PROXY_KEY_FILE={self.key_file}",
            self.python,
            "-m",
            "processes.cli",
            "metadata-proxy",
            "--instance-id",
            server_id,
            "--project-id",
            project_id,
            *service,
        )
