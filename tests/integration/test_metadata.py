"""The metadata service (``api/metadata``) on the real read model: a server made through the
Compute API, projected by the real projector, read back as its guest would, by Nova's paths.

Who asks is decided as Nova's handler decides it: a proxy's signed ``X-Instance-ID`` (with
``X-Tenant-ID``), or the caller's address. Dynamic vendordata targets are real HTTP servers on
this machine, one answering, one failing, one too slow.
"""

from __future__ import annotations

import base64
import dataclasses
import http.server
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
from falcon import testing

from api.metadata.app import Deps, create_app
from api.metadata.caller import Identifier, signature
from api.metadata.passwords import PasswordStore
from api.metadata.relay import BadRequest, signed_request
from api.readmodel import open_pool
from commands.hosts.register import RegisterHost
from commands.network import FixedNetwork
from commands.servers.scheduling import PlaceInstance
from processes.telemetry import metadata_probes
from stratus.config import Settings
from stratus.imagestore import user_data_store
from stratus.metadata.vendordata import Providers, load_static, parse_targets
from tests.fixtures.api import ADMIN_P9, P1, P2, Stack, assert_fault, ssh_public_key
from tests.fixtures.telemetry import get

SECRET = b"shared-with-the-proxy"
STATIC = {"cloud-init": "#cloud-config\nruncmd: [true]\n", "region": "one"}
LATEST_KEYS = {
    "uuid", "meta", "public_keys", "keys", "hostname", "name", "launch_index", "availability_zone",
    "random_seed", "project_id", "devices", "dedicated_cpus",
}  # fmt: skip


class _Target(http.server.BaseHTTPRequestHandler):
    """A dynamic vendordata target: ``/good`` echoes what it was told, ``/fail`` answers 500,
    ``/slow`` answers only once the test is over (after the service's read timeout)."""

    seen: ClassVar[list[dict[str, Any]]] = []
    release: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/slow":
            self.release.wait(30)
        if self.path == "/fail":
            self.send_response(500)
            self.end_headers()
            return
        self.seen.append({"body": body, "agent": self.headers["User-Agent"]})
        answer = orjson.dumps({"told": body["instance-id"], "project": body["project-id"]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api_network() -> FixedNetwork:
    """The stack's fixed network (``tests.fixtures.api``), as ``api.app.build`` reads it from the
    settings: the servers have the address the metadata's network_data.json names."""
    return FixedNetwork("private", "10.0.0.0/24")


@pytest.fixture
def target() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Target)
    server.daemon_threads = True
    _Target.seen = []
    _Target.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Target.release.set()
    server.shutdown()
    server.server_close()


@dataclasses.dataclass
class Meta:
    """The metadata app on the stack's read model, and how a proxy or a guest calls it."""

    client: testing.TestClient

    def signed(self, path: str, server_id: str, project_id: str, **kw: Any) -> testing.Result:
        headers = {
            "X-Instance-ID": server_id,
            "X-Tenant-ID": project_id,
            "X-Instance-ID-Signature": signature(SECRET, server_id),
        }
        return self.client.simulate_request(kw.pop("method", "GET"), path, headers=headers, **kw)


def _meta(
    stack: Stack, settings: Settings, target: str, source_address: str = "forwarded"
) -> Generator[Meta, None, None]:
    static = settings.data_dir / "vendordata.json"
    static.parent.mkdir(parents=True, exist_ok=True)
    static.write_bytes(orjson.dumps(STATIC))
    pool = open_pool(settings.database_url or "")
    providers = Providers(
        names=("StaticJSON", "DynamicJSON"),
        static=load_static(static),
        targets=tuple(
            parse_targets(
                (f"good@{target}/good", f"failing@{target}/fail", f"slow@{target}/slow", "nameless")
            )
        ),
        connect_timeout=5.0,
        read_timeout=0.5,
    )
    deps = Deps(
        pool=pool,
        settings=settings,
        identifier=Identifier(SECRET, source_address),
        providers=providers,
        user_data=user_data_store(settings.data_dir),
        passwords=PasswordStore(settings.data_dir / "metadata_passwords"),
    )
    try:
        yield Meta(testing.TestClient(create_app(deps)))
    finally:
        pool.close()


@pytest.fixture
def meta(stack: Stack, api_settings: Settings, target: str) -> Iterator[Meta]:
    yield from _meta(stack, api_settings, target)


def _server(stack: Stack, who: str, **fields: Any) -> dict[str, Any]:
    """A server made through the API (2.52: ``networks`` "none" is there), once the read model shows it."""
    flavors = stack.get("/v2.1/flavors", who).json["flavors"]
    flavor_id = flavors[0]["id"] if flavors else stack.flavor(id="tiny")[0]
    headers = {**stack.headers(who), "OpenStack-API-Version": "compute 2.52"}
    body = {"server": {"name": "vm", "flavorRef": flavor_id, "networks": "auto", **fields}}
    r = stack.request("POST", "/v2.1/servers", headers, json=body)
    assert r.status_code == 202, r.text
    server_id, position = r.json["server"]["id"], int(r.headers["X-Stratus-Position"])
    r = stack.get(f"/v2.1/servers/{server_id}", who, after=position)
    assert r.status_code == 200, r.text
    return dict(r.json["server"])


def _keypair(stack: Stack, who: str, name: str) -> str:
    key = ssh_public_key()
    r = stack.request("POST", "/v2.1/os-keypairs", who, json={"keypair": {"name": name, "public_key": key}})
    assert r.status_code == 200, r.text
    return key


def test_a_guest_reads_its_openstack_metadata_as_nova_serves_it(stack: Stack, meta: Meta) -> None:
    key = _keypair(stack, P1, "k1")
    user_data = b"#!/bin/sh\necho hello\n"
    server = _server(
        stack, P1, name="Web One", key_name="k1", metadata={"role": "web"},
        user_data=base64.b64encode(user_data).decode(),
    )  # fmt: skip
    sid, project = server["id"], server["tenant_id"]

    r = meta.client.simulate_get("/")  # the versions, as Nova lists them before knowing the caller
    assert r.status_code == 200 and r.text.splitlines()[-2:] == ["2009-04-04", "latest"]
    r = meta.signed("/openstack", sid, project)
    assert r.text.splitlines() == [
        "2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15", "2016-06-30", "2016-10-06", "2017-02-22",
        "2018-08-27", "2020-10-14", "2025-04-04", "latest",
    ]  # fmt: skip
    r = meta.signed("/openstack/latest/", sid, project)
    assert r.text.splitlines() == [
        "meta_data.json",
        "user_data",
        "password",
        "vendor_data.json",
        "network_data.json",
        "vendor_data2.json",
    ]
    assert meta.signed("/openstack/2012-08-10", sid, project).text.splitlines() == [
        "meta_data.json",
        "user_data",
    ]

    r = meta.signed("/openstack/latest/meta_data.json", sid, project)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    md = r.json
    assert set(md) == LATEST_KEYS
    assert md["uuid"] == sid and md["name"] == "Web One" and md["hostname"] == "web-one.novalocal"
    assert md["project_id"] == project and md["launch_index"] == 0 and md["meta"] == {"role": "web"}
    assert md["public_keys"] == {"k1": key} and md["keys"] == [{"name": "k1", "type": "ssh", "data": key}]
    assert (
        md["devices"] == [] and md["dedicated_cpus"] == [] and len(base64.b64decode(md["random_seed"])) == 512
    )
    # each key from the version Nova adds it in
    older = meta.signed("/openstack/2012-08-10/meta_data.json", sid, project).json
    assert set(older) == LATEST_KEYS - {"random_seed", "project_id", "devices", "dedicated_cpus"}
    assert "devices" not in meta.signed("/openstack/2015-10-15/meta_data.json", sid, project).json
    assert "dedicated_cpus" not in meta.signed("/openstack/2018-08-27/meta_data.json", sid, project).json

    r = meta.signed("/openstack/latest/user_data", sid, project)
    assert r.status_code == 200 and r.content == user_data
    assert meta.signed("/openstack/2012-08-10/vendor_data.json", sid, project).status_code == 404
    assert meta.signed("/openstack/2099-01-01/meta_data.json", sid, project).status_code == 404
    assert meta.signed("/openstack/latest/nothing", sid, project).status_code == 404

    net = meta.signed("/openstack/latest/network_data.json", sid, project).json
    address = server["addresses"]["private"][0]
    assert set(net) == {"links", "networks", "services"}
    (link,) = net["links"]
    assert set(link) == {"id", "vif_id", "type", "mtu", "ethernet_mac_address"}
    assert link["ethernet_mac_address"] == address["OS-EXT-IPS-MAC:mac_addr"]
    (network,) = net["networks"]
    assert set(network) == {"id", "type", "link", "ip_address", "netmask", "routes", "network_id", "services"}
    assert (network["ip_address"], network["type"], network["link"]) == (address["addr"], "ipv4", link["id"])
    assert network["routes"] == [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.0.1"}]


def test_the_ec2_tree(stack: Stack, meta: Meta) -> None:
    key = _keypair(stack, P1, "k2")
    server = _server(stack, P1, name="ec2", key_name="k2", user_data=base64.b64encode(b"ud").decode())
    sid, project = server["id"], server["tenant_id"]
    listing = meta.signed("/latest/meta-data/", sid, project).text.splitlines()
    assert {"ami-id", "instance-id", "local-ipv4", "hostname", "placement/", "block-device-mapping/"} <= set(
        listing
    )
    assert "public-keys/" in listing  # and public-keys itself lists "0=<key name>"
    assert meta.signed("/latest/meta-data/instance-id", sid, project).text == "i-" + sid.replace("-", "")[:8]
    assert (
        meta.signed("/latest/meta-data/local-ipv4", sid, project).text
        == server["addresses"]["private"][0]["addr"]
    )
    assert meta.signed("/latest/meta-data/public-keys", sid, project).text == "0=k2"
    assert meta.signed("/latest/meta-data/public-keys/0/openssh-key", sid, project).text == key
    assert meta.signed("/latest/meta-data/block-device-mapping/root", sid, project).text == "/dev/sda1"
    assert meta.signed("/2009-04-04/user-data", sid, project).content == b"ud"
    assert meta.signed("/latest/user-data", sid, project).content == b"ud"
    assert "local-hostname" not in meta.signed("/1.0/meta-data", sid, project).text.splitlines()
    assert meta.signed("/1999-01-01/meta-data", sid, project).status_code == 404
    assert meta.signed("/latest/meta-data/nothing", sid, project).status_code == 404

    bare = _server(stack, P1, name="bare", networks="none")  # no user data, no key, no address
    assert meta.signed("/latest/user-data", bare["id"], project).status_code == 404
    assert meta.signed("/openstack/latest/user_data", bare["id"], project).status_code == 404
    assert meta.signed("/openstack/latest/network_data.json", bare["id"], project).json == {}
    assert "keys" not in meta.signed("/openstack/latest/meta_data.json", bare["id"], project).json


def test_a_proxy_must_sign_and_no_project_reads_another_s_guest(stack: Stack, meta: Meta) -> None:
    mine = _server(stack, P1, name="mine", user_data=base64.b64encode(b"p1 secret").decode())
    theirs = _server(stack, P2, name="theirs", user_data=base64.b64encode(b"p2 secret").decode())
    p1, p2 = mine["tenant_id"], theirs["tenant_id"]
    assert p1 != p2
    assert meta.signed("/latest/user-data", theirs["id"], p2).content == b"p2 secret"

    path = "/openstack/latest/user_data"
    for headers in (
        {"X-Instance-ID": mine["id"], "X-Tenant-ID": p1},  # no signature
        {"X-Instance-ID": mine["id"], "X-Tenant-ID": p1, "X-Instance-ID-Signature": "0" * 64},
        {
            "X-Instance-ID": mine["id"],
            "X-Tenant-ID": p1,
            "X-Instance-ID-Signature": signature(SECRET, theirs["id"]),
        },
        {
            "X-Instance-ID": mine["id"],
            "X-Tenant-ID": p1,
            "X-Instance-ID-Signature": signature(b"guess", mine["id"]),
        },
    ):
        r = meta.client.simulate_get(path, headers=headers)
        assert r.status_code == 403 and b"secret" not in r.content, r.text
    # a signed id with another project's name: not found, never the other project's data
    r = meta.signed(path, theirs["id"], p1)
    assert r.status_code == 404 and b"secret" not in r.content
    r = meta.client.simulate_get(
        path, headers={"X-Instance-ID": mine["id"], "X-Instance-ID-Signature": signature(SECRET, mine["id"])}
    )
    assert r.status_code == 400 and "X-Tenant-ID" in r.text
    # the address of P2's guest names P2's guest only, whoever forwards it
    r = meta.client.simulate_get(path, headers={"X-Forwarded-For": theirs["addresses"]["private"][0]["addr"]})
    assert r.content == b"p2 secret"
    assert meta.client.simulate_get(path, headers={"X-Forwarded-For": "10.0.0.250"}).status_code == 404
    assert meta.client.simulate_get(path).status_code == 403  # nothing names a guest


def test_addresses_are_believed_only_as_the_settings_say(
    stack: Stack, api_settings: Settings, target: str
) -> None:
    server = _server(stack, P1, name="by-address")
    address = server["addresses"]["private"][0]["addr"]
    path = "/openstack/latest/meta_data.json"
    peer = _meta(stack, api_settings, target, source_address="peer")
    client = next(peer).client
    assert client.simulate_get(path, remote_addr=address).json["uuid"] == server["id"]
    forwarded = {"X-Forwarded-For": address}  # from 127.0.0.1: not believed in "peer" mode
    assert client.simulate_get(path, headers=forwarded, remote_addr="127.0.0.1").status_code == 404
    peer.close()
    off = _meta(stack, api_settings, target, source_address="off")
    client = next(off).client
    assert client.simulate_get(path, headers=forwarded, remote_addr=address).status_code == 400  # Nova: no id
    off.close()


def test_vendordata_static_and_dynamic_a_bad_target_breaks_nothing(stack: Stack, meta: Meta) -> None:
    server = _server(stack, P1, name="vd", metadata={"k": "v"})
    sid, project = server["id"], server["tenant_id"]
    assert meta.signed("/openstack/latest/vendor_data.json", sid, project).json == STATIC
    r = meta.signed("/openstack/latest/vendor_data2.json", sid, project)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json == {
        "static": STATIC,
        "good": {"told": sid, "project": project},
        "failing": {},
        "slow": {},
    }
    (call,) = _Target.seen
    assert call["agent"] == "openstack-nova-vendordata"
    assert set(call["body"]) == {
        "project-id", "instance-id", "image-id", "user-data", "hostname", "metadata", "boot-roles"
    }  # fmt: skip
    assert call["body"]["metadata"] == {"k": "v"} and call["body"]["hostname"] == "vd.novalocal"
    # the metadata itself never waits for vendordata
    assert meta.signed("/openstack/latest/meta_data.json", sid, project).json["uuid"] == sid


def test_the_password_is_posted_once(stack: Stack, meta: Meta, api_settings: Settings) -> None:
    server = _server(stack, P1, name="pw")
    sid, project = server["id"], server["tenant_id"]
    path = "/openstack/latest/password"
    r = meta.signed(path, sid, project)
    assert (r.status_code, r.content) == (200, b"")
    assert meta.signed(path, sid, project, method="POST", body=b"x" * 1021).status_code == 400
    assert meta.signed(path, sid, project, method="POST", body=b"encrypted==").status_code == 200
    assert meta.signed(path, sid, project).content == b"encrypted=="
    assert meta.signed(path, sid, project, method="POST", body=b"another").status_code == 409
    assert meta.signed(path, sid, project).content == b"encrypted=="
    assert meta.signed("/openstack/2012-08-10/password", sid, project).status_code == 404
    assert meta.signed("/openstack/latest/meta_data.json", sid, project, method="POST").status_code == 405
    assert (api_settings.data_dir / "metadata_passwords" / sid).stat().st_mode & 0o077 == 0


def test_a_deleted_server_has_no_metadata(stack: Stack, meta: Meta) -> None:
    server = _server(stack, P1, name="gone")
    r = stack.request("DELETE", f"/v2.1/servers/{server['id']}", P1)
    assert r.status_code == 204
    stack.get(f"/v2.1/servers/{server['id']}", P1, after=int(r.headers["X-Stratus-Position"]))
    assert (
        meta.signed("/openstack/latest/meta_data.json", server["id"], server["tenant_id"]).status_code == 404
    )


def test_the_settings_round_trip(tmp_path: Path) -> None:
    env = {
        "STRATUS_METADATA_BIND": "0.0.0.0:8775",
        "STRATUS_METADATA_PROXY_KEY_FILE": str(tmp_path / "proxy.key"),
        "STRATUS_METADATA_SOURCE_ADDRESS": "peer",
        "STRATUS_VENDORDATA_PROVIDERS": "StaticJSON,DynamicJSON",
        "STRATUS_VENDORDATA_DYNAMIC_TARGETS": "a@http://x/1, b@http://y/2",
        "STRATUS_VENDORDATA_DYNAMIC_READ_TIMEOUT": "1.5",
    }
    s = Settings.from_env(env)
    assert s.vendordata_dynamic_targets == ("a@http://x/1", "b@http://y/2")
    assert s.metadata_proxy_key_file == tmp_path / "proxy.key" and s.vendordata_dynamic_read_timeout == 1.5
    assert Settings.from_env(s.to_env()) == s
    with pytest.raises(ValueError, match="STRATUS_METADATA_SOURCE_ADDRESS must be one of off, peer"):
        Settings.from_env({"STRATUS_METADATA_SOURCE_ADDRESS": "anyone"})


def test_the_proxy_replaces_whatever_names_a_caller() -> None:
    """``stratus metadata-proxy`` serves one server: a guest's own caller headers never go on."""
    forged = (
        b"POST /openstack/latest/password HTTP/1.1\r\nHost: 169.254.169.254\r\nX-Instance-ID: other\r\n"
        b"x-tenant-id: p2\r\nX-Instance-ID-Signature: abc\r\nX-Forwarded-For: 10.0.0.9\r\n"
        b"Connection: keep-alive\r\nContent-Length: 4"
    )
    request, length = signed_request(forged, "mine", "p1", SECRET)
    lines = request.decode().split("\r\n")
    assert lines[0] == "POST /openstack/latest/password HTTP/1.1" and length == 4
    assert [line for line in lines if line.lower().startswith(("x-", "connection"))] == [
        "X-Instance-ID: mine",
        "X-Tenant-ID: p1",
        f"X-Instance-ID-Signature: {signature(SECRET, 'mine')}",
        "Connection: close",
    ]
    assert request.endswith(b"\r\n\r\n") and "Host: 169.254.169.254" in lines
    for bad in (
        b"GET /\r\nHost: x",
        b"GET / HTTP/1.1\r\nno colon",
        b"GET / HTTP/1.1\r\nContent-Length: 999999",
    ):
        with pytest.raises(BadRequest):
            signed_request(bad, "mine", "p1", SECRET)


# -- os-server-password: the owner reads and clears what the guest posted (api/server_password.py) ----
def _password(stack: Stack, server_id: str, who: Any, method: str = "GET") -> testing.Result:
    return stack.request(method, f"/v2.1/servers/{server_id}/os-server-password", who)


def test_the_owner_reads_and_clears_the_password_the_guest_posted(stack: Stack, meta: Meta) -> None:
    server = _server(stack, P1, name="pw-api")
    sid, project = server["id"], server["tenant_id"]
    reader = stack.identities.persona("dave", "p1", "reader")
    r = _password(stack, sid, P1)
    assert (r.status_code, r.json) == (200, {"password": ""})  # nothing posted yet: Nova's ""

    path = "/openstack/latest/password"
    assert meta.signed(path, sid, project, method="POST", body=b"xlozO3wLCBRWAa2y==").status_code == 200
    for who in (P1, reader, ADMIN_P9):  # the project's reader and member, any admin
        r = _password(stack, sid, who)
        assert (r.status_code, r.json) == (200, {"password": "xlozO3wLCBRWAa2y=="}), who
    assert_fault(_password(stack, sid, P2), 404, "itemNotFound", sid)  # another project's server
    assert_fault(_password(stack, sid, P2, "DELETE"), 404, "itemNotFound", sid)
    unknown = "8d9e1c3a-0000-4000-8000-000000000000"
    assert_fault(_password(stack, unknown, P1), 404, "itemNotFound", unknown)
    assert_fault(_password(stack, "not-a-uuid", P1, "DELETE"), 404, "itemNotFound")
    # a reader reads but does not clear (Nova's :clear is project member or admin)
    assert_fault(_password(stack, sid, reader, "DELETE"), 403, "forbidden", "member")
    assert _password(stack, sid, {}).status_code == 401

    r = _password(stack, sid, P1, "DELETE")
    assert (r.status_code, r.text) == (204, "")
    assert _password(stack, sid, P1).json == {"password": ""}
    assert _password(stack, sid, P1, "DELETE").status_code == 204  # nothing to clear: still 204
    # the guest may post again once the owner cleared it
    assert meta.signed(path, sid, project, method="POST", body=b"again").status_code == 200
    assert meta.signed(path, sid, project).content == b"again"
    assert _password(stack, sid, P1).json == {"password": "again"}


def test_a_servers_password_goes_with_the_server(stack: Stack, meta: Meta, api_settings: Settings) -> None:
    kept = api_settings.data_dir / "metadata_passwords"
    path = "/openstack/latest/password"
    deleted, forced = _server(stack, P1, name="pw-del"), _server(stack, P1, name="pw-force")
    for server in (deleted, forced):
        assert (
            meta.signed(path, server["id"], server["tenant_id"], method="POST", body=b"p").status_code == 200
        )
        assert (kept / server["id"]).is_file()

    r = stack.request("DELETE", f"/v2.1/servers/{deleted['id']}", P1)
    assert r.status_code == 204
    assert not (kept / deleted["id"]).exists()
    r = stack.request("POST", f"/v2.1/servers/{forced['id']}/action", P1, json={"forceDelete": None})
    assert r.status_code == 202, r.text
    assert not (kept / forced["id"]).exists()
    assert_fault(_password(stack, deleted["id"], P1), 404, "itemNotFound")


def test_a_deletion_stands_when_the_password_cannot_be_removed(
    stack: Stack, meta: Meta, api_settings: Settings
) -> None:
    server = _server(stack, P1, name="pw-stuck")
    stuck = api_settings.data_dir / "metadata_passwords" / server["id"]
    (stuck / "in-the-way").mkdir(parents=True)  # a directory where the file would be: unlink fails
    r = stack.request("DELETE", f"/v2.1/servers/{server['id']}", P1)
    assert r.status_code == 204, r.text
    position = int(r.headers["X-Stratus-Position"])
    assert stack.get(f"/v2.1/servers/{server['id']}", P1, after=position).status_code == 404
    assert stuck.is_dir()


def test_a_server_being_deleted_posts_no_password(stack: Stack, meta: Meta, api_settings: Settings) -> None:
    """Its guest runs until its host destroys it (no worker here: it stays ``deleting``); a post
    then would outlive the server, so the service refuses it."""
    stack.handlers.register_host(RegisterHost("pw-host", vcpus=8, memory_mb=16384, disk_gb=100))
    server = _server(stack, P1, name="pw-going")
    sid, project = server["id"], server["tenant_id"]
    stack.handlers.place_instance(PlaceInstance(sid, "pw-host"))
    r = stack.request("DELETE", f"/v2.1/servers/{sid}", P1)
    assert r.status_code == 204
    shown = stack.get(f"/v2.1/servers/{sid}", P1, after=int(r.headers["X-Stratus-Position"]))
    assert shown.json["server"]["OS-EXT-STS:task_state"] == "deleting"
    path = "/openstack/latest/password"
    assert meta.signed(path, sid, project, method="POST", body=b"late").status_code == 409
    assert not (api_settings.data_dir / "metadata_passwords" / sid).exists()


def _sample(text: str, line_start: str) -> float:
    found = [ln for ln in text.splitlines() if ln.startswith(line_start + " ")]
    return float(found[0].rsplit(" ", 1)[1]) if found else 0.0


def test_guests_requests_are_counted_by_path_and_status_on_the_probes_port(
    stack: Stack, meta: Meta, api_settings: Settings
) -> None:
    server = _server(stack, P1, name="counted")
    sid, project = server["id"], server["tenant_id"]
    ok = 'stratus_metadata_requests_total{path="/openstack/{version}/meta_data.json",status="200"}'
    missing = 'stratus_metadata_requests_total{path="other",status="404"}'
    timed = 'stratus_metadata_request_duration_seconds_count{path="/openstack/{version}/meta_data.json"}'
    probes = metadata_probes(dataclasses.replace(api_settings, metadata_metrics_bind="127.0.0.1:0"))
    assert probes is not None
    try:
        base = f"http://{probes.address}"
        before = get(base + "/metrics")[1]
        assert meta.signed("/openstack/latest/meta_data.json", sid, project).status_code == 200
        assert meta.signed("/openstack/2018-08-27/meta_data.json", sid, project).status_code == 200
        assert meta.signed("/no/such/path-chosen-by-a-guest", sid, project).status_code == 404
        status, after = get(base + "/metrics")
        assert status == 200
        assert _sample(after, ok) - _sample(before, ok) == 2  # both versions under one label
        assert _sample(after, timed) - _sample(before, timed) == 2
        assert _sample(after, missing) - _sample(before, missing) == 1
        assert "path-chosen-by-a-guest" not in after
        status, ready = get(base + "/readyz")
        assert status == 200 and '"postgresql":{"ok":true' in ready
        assert get(base + "/healthz") == (200, '{"status":"alive"}')
        # the address taken (a worker restarted beside the old one): no probes, the service goes on
        taken = dataclasses.replace(api_settings, metadata_metrics_bind=probes.address)
        assert metadata_probes(taken) is None
    finally:
        probes.close()
    # the port guests call answers none of the probes' paths from the tree (it is a guest's path there)
    assert meta.signed("/metrics", sid, project).status_code == 404
    assert metadata_probes(dataclasses.replace(api_settings, metadata_metrics_bind="")) is None
