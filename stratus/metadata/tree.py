"""Nova's metadata trees for one guest, path by path (nova/api/metadata/base.py).

``Guest`` is what the service knows of one server, gathered once per request from the read models;
``lookup`` answers a path the way Nova's ``InstanceMetadata.lookup`` does: a value (text, bytes, a
list or a dict, rendered by ``render``), ``PASSWORD`` for the password's handler, or ``NotInTree``.
Each key appears from the version Nova adds it in, and no key Nova does not serve is added.
"""

from __future__ import annotations

import base64
import ipaddress
import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid5

import orjson

from stratus.hostname import hostname_for

# The EC2 versions, then Nova's OpenStack versions (each the date of the release that changed it).
EC2_VERSIONS = (
    "1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15", "2008-02-01",
    "2008-09-01", "2009-04-04",
)  # fmt: skip
FOLSOM, GRIZZLY, HAVANA, LIBERTY = "2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15"
NEWTON_ONE, NEWTON_TWO, OCATA, ROCKY = "2016-06-30", "2016-10-06", "2017-02-22", "2018-08-27"
VICTORIA, EPOXY = "2020-10-14", "2025-04-04"
OPENSTACK_VERSIONS = (FOLSOM, GRIZZLY, HAVANA, LIBERTY, NEWTON_ONE, NEWTON_TWO, OCATA, ROCKY, VICTORIA, EPOXY)

MD_JSON, UD, PASS, VD_JSON, VD2_JSON, NW_JSON = (
    "meta_data.json", "user_data", "password", "vendor_data.json", "vendor_data2.json", "network_data.json"
)  # fmt: skip
TEXT, JSON = "text/plain", "application/json"
# Nova's mappings for a server without a root device name (nova/block_device.py): Stratus guests
# boot their kernel directly, with none.
DEFAULT_MAPPINGS = {"ami": "sda1", "ephemeral0": "sda2", "root": "/dev/sda1", "swap": "sda3"}
DEFAULT_ZONE = "nova"
PASSWORD = object()  # lookup's answer for the password path: the app handles its GET and POST


class NotInTree(Exception):
    """The path names nothing in the guest's metadata: 404."""


@dataclass
class Guest:
    """One server's metadata sources: its read-model row, key pair, user data and vendordata."""

    row: Mapping[str, Any]
    keypair: Mapping[str, Any] | None
    user_data: bytes | None
    dhcp_domain: str
    fixed_cidr: str
    vendordata: Callable[[Guest], dict[str, Any]]  # vendor_data2.json, called only when asked for
    static_vendordata: Callable[[], dict[str, Any] | None]  # vendor_data.json (None: not provided)
    random_bytes: Callable[[int], bytes]
    mimetype: str = field(default=TEXT)

    @property
    def uuid(self) -> str:
        return str(self.row["id"])

    @property
    def hostname(self) -> str:
        name = str(self.row.get("hostname") or hostname_for(str(self.row["name"])))
        return f"{name}.{self.dhcp_domain}" if self.dhcp_domain else name

    @property
    def availability_zone(self) -> str | None:
        """The zone asked for; else, once placed, its host's (the default zone when in none)."""
        if self.row.get("availability_zone"):
            return str(self.row["availability_zone"])
        if not self.row.get("host"):
            return None
        return str(self.row.get("host_zone") or DEFAULT_ZONE)

    def fixed_ips(self) -> list[str]:
        return [str(p["address"]) for p in self.row.get("ports") or []]

    # -- the OpenStack tree ------------------------------------------------------------------------
    def meta_data(self, version: str) -> dict[str, Any]:
        md: dict[str, Any] = {"uuid": self.uuid}
        if self.row.get("metadata"):
            md["meta"] = dict(self.row["metadata"])
        if self.keypair is not None:
            name, key = str(self.keypair["name"]), str(self.keypair["public_key"])
            md["public_keys"] = {name: key}
            md["keys"] = [{"name": name, "type": str(self.keypair["type"]), "data": key}]
        md["hostname"] = self.hostname
        md["name"] = str(self.row["name"])
        md["launch_index"] = int(self.row.get("launch_index") or 0)
        md["availability_zone"] = self.availability_zone
        if _os_at_least(GRIZZLY, version):
            md["random_seed"] = base64.b64encode(self.random_bytes(512)).decode()
        if _os_at_least(LIBERTY, version):
            md["project_id"] = str(self.row["project_id"])
        if _os_at_least(NEWTON_ONE, version):
            md["devices"] = []  # no device carries a tag in Stratus
        if _os_at_least(VICTORIA, version):
            md["dedicated_cpus"] = []  # no CPU pinning in Stratus
        return md

    def network_data(self) -> dict[str, Any]:
        """Nova's ``netutils.get_network_metadata``: a link and a static IPv4 network per port."""
        if not self.row.get("ports"):
            return {}  # Nova's answer for a server without a network
        links, networks = [], []
        net = ipaddress.ip_network(self.fixed_cidr, strict=False) if self.fixed_cidr else None
        for i, port in enumerate(self.row.get("ports") or []):
            link = f"interface{i}"  # Nova's name for a VIF without a device name
            vif_id = str(uuid5(UUID(self.uuid), str(port["mac"])))  # Stratus's ports have no id of their own
            links.append(
                {
                    "id": link,
                    "vif_id": vif_id,
                    "type": "phy",
                    "mtu": None,
                    "ethernet_mac_address": port["mac"],
                }
            )
            routes = []
            if net is not None:
                gateway = str(next(net.hosts()))  # the gateway commands.network.Network.define keeps
                routes = [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": gateway}]
            networks.append(
                {"id": f"network{i}", "type": "ipv4", "link": link, "ip_address": port["address"],
                 "netmask": str(net.netmask) if net is not None else "255.255.255.255", "routes": routes,
                 "network_id": str(port["network_id"]), "services": []}
            )  # fmt: skip
        return {"links": links, "networks": networks, "services": []}

    def version_listing(self, version: str) -> list[str]:
        names = [MD_JSON]
        if self.user_data is not None:
            names.append(UD)
        for since, name in ((GRIZZLY, PASS), (HAVANA, VD_JSON), (LIBERTY, NW_JSON), (NEWTON_TWO, VD2_JSON)):
            if _os_at_least(since, version):
                names.append(name)
        return names

    def openstack_item(self, tokens: list[str]) -> Any:
        version = _openstack_version(tokens[0])
        path = "/".join(tokens[1:])
        if not path:
            return self.version_listing(version)
        if path == MD_JSON:
            return self._json(self.meta_data(version))
        if path == UD and self.user_data is not None:
            return self.user_data
        if path == PASS and _os_at_least(GRIZZLY, version):
            return PASSWORD
        if path == VD_JSON and _os_at_least(HAVANA, version):
            static = self.static_vendordata()
            if static is not None:
                return self._json(static)
        if path == NW_JSON and _os_at_least(LIBERTY, version):
            return self._json(self.network_data())
        if path == VD2_JSON and _os_at_least(NEWTON_TWO, version):
            return self._json(self.vendordata(self))
        raise NotInTree(path)

    def _json(self, value: Any) -> bytes:
        self.mimetype = JSON
        return orjson.dumps(value)

    # -- the EC2 tree --------------------------------------------------------------------------------
    def ec2(self, version: str) -> dict[str, Any]:
        if version == "latest":
            version = EC2_VERSIONS[-1]
        if version not in EC2_VERSIONS:
            raise NotInTree(version)
        fixed = self.fixed_ips()
        image = self.row.get("image") or {}
        hostname = self.hostname
        md: dict[str, Any] = {
            "ami-id": ec2_id("ami", str(self.row.get("image_ref") or "")),
            "ami-launch-index": int(self.row.get("launch_index") or 0),
            "ami-manifest-path": "FIXME",
            "instance-id": ec2_id("i", self.uuid),
            "hostname": hostname,
            "local-ipv4": fixed[0] if fixed else "",
            "reservation-id": str(self.row.get("reservation_id") or ""),
            "security-groups": ["default"],
        }
        if self.keypair is not None:
            md["public-keys"] = {
                "0": {"_name": f"0={self.row['key_name']}", "openssh-key": str(self.keypair["public_key"])}
            }
        if _ec2_at_least("2007-01-19", version):
            md.update({"local-hostname": hostname, "public-hostname": hostname, "public-ipv4": ""})
        if _ec2_at_least("2007-08-29", version):
            md["instance-type"] = str((self.row.get("flavor") or {}).get("name", ""))
        if _ec2_at_least("2007-12-15", version):
            md["block-device-mapping"] = dict(DEFAULT_MAPPINGS)
            if image.get("kernel_id"):
                md["kernel-id"] = ec2_id("aki", str(image["kernel_id"]))
            if image.get("ramdisk_id"):
                md["ramdisk-id"] = ec2_id("ari", str(image["ramdisk_id"]))
        if _ec2_at_least("2008-02-01", version):
            md["placement"] = {"availability-zone": self.availability_zone}
        if _ec2_at_least("2008-09-01", version):
            md["instance-action"] = "none"
        data: dict[str, Any] = {"meta-data": md}
        if self.user_data is not None:
            data["user-data"] = self.user_data
        return data

    # -- lookup ------------------------------------------------------------------------------------
    def lookup(self, path: str) -> Any:
        """Nova's ``InstanceMetadata.lookup``: ``/openstack/...``; anything else is the EC2 tree."""
        tokens = posixpath.normpath("/" + path.lstrip("/")).split("/")[1:]
        if tokens[0] not in ("ec2", "openstack"):
            tokens = ["ec2"] if tokens[0] == "" else ["ec2", *tokens]
        if len(tokens) == 1:
            return [*OPENSTACK_VERSIONS, "latest"] if tokens[0] == "openstack" else [*EC2_VERSIONS, "latest"]
        if tokens[0] == "openstack":
            return self.openstack_item(tokens[1:])
        return find_path(self.ec2(tokens[1]), tokens[2:])


def config_drive_files(guest: Guest) -> Iterator[tuple[str, bytes]]:
    """Nova's ``metadata_for_config_drive``: each file of the config drive, path and content.

    The EC2 tree of the versions Nova's ``config_drive_skip_versions`` leaves (``2009-04-04`` and
    ``latest``), as ``meta-data.json`` and ``user-data``; then every OpenStack version's documents,
    those the metadata service serves for it (no password: the guest has none to read yet)."""
    for version in (EC2_VERSIONS[-1], "latest"):
        data = guest.ec2(version)
        if "user-data" in data:
            yield f"ec2/{version}/user-data", data.pop("user-data")
        # Nova means to drop public-keys' "_name" here but looks for it in the wrong place
        # (data["public-keys"], not data["meta-data"]["public-keys"]), so it stays: as Nova.
        yield f"ec2/{version}/meta-data.json", orjson.dumps(data["meta-data"])
    for version in (*OPENSTACK_VERSIONS, "latest"):
        for name in guest.version_listing(_openstack_version(version)):
            if name == PASS:
                continue
            path = f"openstack/{version}/{name}"
            try:
                value = guest.lookup(path)
            except NotInTree:
                continue  # vendor_data.json without StaticJSON: not on the drive either
            yield path, value if isinstance(value, bytes) else render(value)


def ec2_id(prefix: str, uuid: str) -> str:
    """An EC2-style id (``i-0a1b2c3d``): Nova maps its integer ids; Stratus has only UUIDs, so the
    first eight hex digits of the UUID stand for one."""
    digits = uuid.replace("-", "")[:8]
    return f"{prefix}-{digits:0>8}"


def find_path(data: Any, tokens: list[str]) -> Any:
    """Nova's ``find_path_in_tree``."""
    for i, token in enumerate(tokens):
        if not isinstance(data, dict) or token not in data:
            raise NotInTree("/".join(tokens[: i + 1]))
        data = data[token]
    return data


def render(data: Any) -> bytes:
    """Nova's ``ec2_md_print``: a dict as its keys (subtrees with ``/``), a list a line each."""
    if isinstance(data, dict):
        lines = []
        for key in sorted(data):
            if key == "_name":
                continue
            value = data[key]
            if isinstance(value, dict):
                lines.append(str(value["_name"]) if "_name" in value else f"{key}/")
            else:
                lines.append(key)
        return "\n".join(lines).encode()
    if isinstance(data, list):
        return "\n".join(str(item) for item in data).encode()
    if isinstance(data, bytes):
        return data
    return str(data).encode()


def _openstack_version(version: str) -> str:
    if version == "latest":
        return OPENSTACK_VERSIONS[-1]
    if version not in OPENSTACK_VERSIONS:
        raise NotInTree(version)
    return version


def _os_at_least(required: str, version: str) -> bool:
    return OPENSTACK_VERSIONS.index(version) >= OPENSTACK_VERSIONS.index(required)


def _ec2_at_least(required: str, version: str) -> bool:
    return EC2_VERSIONS.index(version) >= EC2_VERSIONS.index(required)
