"""deploy/: the example JetStream cluster configuration works, on three loopback nodes, and is closed:
clients need the password over TLS, routes a certificate from the deployment's CA."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js.api import StreamConfig

from stratus.config import Settings
from stratus.eventstore import NatsBridge
from stratus.natsserver import binary
from tests.fixtures.tls import write_test_pki

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "deploy" / "nats-cluster").glob("nats-*.conf"))
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


PASSWORD = "cluster-test-password"


def test_there_are_three_node_configs_that_the_pinned_server_accepts(tmp_path: Path) -> None:
    assert [c.name for c in CONFIGS] == ["nats-1.conf", "nats-2.conf", "nats-3.conf"]
    tls = write_test_pki(tmp_path / "tls")
    env = {"PATH": "/usr/bin:/bin", "STRATUS_NATS_PASSWORD": PASSWORD}
    for conf in CONFIGS:
        local = tmp_path / conf.name
        local.write_text(conf.read_text().replace("/etc/stratus/tls", str(tls)))
        done = subprocess.run(
            [str(binary()), "-t", "-c", str(local)], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_example_configs_refuse_to_start_open() -> None:
    """Without its certificates and password a node does not start: it never falls back to an open port."""
    for conf in CONFIGS:
        done = subprocess.run(
            [str(binary()), "-t", "-c", str(conf)], capture_output=True, text=True, env={"PATH": "/bin"}
        )
        assert done.returncode != 0
        text = conf.read_text()
        assert "allow_non_tls: false" in text and "password: $STRATUS_NATS_PASSWORD" in text
        assert "verify: true" in text.split("cluster {", 1)[1]  # routes: mutual TLS
        assert "http: 127.0.0.1:" in text  # monitoring on loopback only


def test_every_unit_runs_a_stratus_command_that_exists() -> None:
    commands = set()
    for unit in UNITS:
        match = re.search(r"^ExecStart=/opt/stratus/\.venv/bin/stratus (\w+)", unit.read_text(), re.M)
        assert match, unit.name
        commands.add(match.group(1))
    assert commands == {"nats", "api", "projector", "rebuild", "scheduler", "hypervisor"}
    help_text = subprocess.run(
        [sys.executable, "-m", "processes.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert all(command in help_text for command in commands)


def _meta_leader(monitor_port: int) -> str | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor_port}/jsz") as r:
        leader = json.load(r).get("meta_cluster", {}).get("leader")
    return str(leader) if leader else None


@pytest.fixture
def loopback_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[list[str], list[subprocess.Popen[bytes]]]]:
    """The three example nodes on loopback: same files, ports and paths rewritten, a test CA's
    certificates in place of /etc/stratus/tls; clients trust that CA through ``SSL_CERT_FILE``, as
    deploy/systemd/stratus.env.example has the parts do. Yields client URLs with the password."""
    tls = write_test_pki(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(tls / "ca.pem"))
    client, route, monitor = free_ports(3), free_ports(3), free_ports(3)
    procs = []
    for i, conf in enumerate(CONFIGS):
        text = conf.read_text()
        text = text.replace("/etc/stratus/tls", str(tls))
        text = text.replace("0.0.0.0:4222", f"127.0.0.1:{client[i]}")
        text = text.replace("127.0.0.1:8222", f"127.0.0.1:{monitor[i]}")
        text = text.replace("0.0.0.0:6222", f"127.0.0.1:{route[i]}")
        text = text.replace("/var/lib/stratus/nats", str(tmp_path / f"store-{i + 1}"))
        for j in range(3):
            text = text.replace(f"nats-{j + 1}.internal.example:6222", f"127.0.0.1:{route[j]}")
        local = tmp_path / conf.name
        local.write_text(text)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "processes.cli", "nats", "--config", str(local)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env={**os.environ, "STRATUS_NATS_PASSWORD": PASSWORD},
            )
        )
    try:
        for port in monitor:
            deadline = time.monotonic() + 20
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz?js-enabled-only=true"):
                        break
                except OSError:
                    assert time.monotonic() < deadline, "a node did not become healthy"
                    time.sleep(0.1)
        # Ready for streams once the nodes have elected a meta leader.
        deadline = time.monotonic() + 20
        while not _meta_leader(monitor[0]):
            assert time.monotonic() < deadline, "the cluster elected no leader"
            time.sleep(0.1)
        yield [f"tls://stratus:{PASSWORD}@127.0.0.1:{p}" for p in client], procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_the_example_cluster_keeps_a_three_replica_stream_through_the_loss_of_a_node(
    loopback_cluster: tuple[list[str], list[subprocess.Popen[bytes]]],
) -> None:
    urls, procs = loopback_cluster

    async def scenario() -> None:
        nc = await nats.connect(servers=urls, connect_timeout=5)
        try:
            js = nc.jetstream(timeout=10)
            deadline = time.monotonic() + 20
            while True:  # the meta leader is elected shortly after the nodes are healthy
                try:
                    info = await js.add_stream(StreamConfig(name="STRATUS", subjects=["x.>"], num_replicas=3))
                    break
                except nats.errors.Error:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.2)
            assert info.config.num_replicas == 3
            assert (await js.publish("x.1", b"one")).seq == 1
            leader = None
            while leader is None:
                cluster = (await js.stream_info("STRATUS")).cluster
                leader = cluster.leader if cluster is not None else None
                if leader is None:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)
            # A node that neither leads the stream nor serves this client goes away: appends carry on.
            connected = urls.index(f"tls://{nc.connected_url.netloc}") if nc.connected_url else -1
            follower = next(i for i in range(3) if f"nats-{i + 1}" != leader and i != connected)
            procs[follower].kill()
            procs[follower].wait()
            assert (await js.publish("x.2", b"two")).seq == 2
        finally:
            await nc.close()

    asyncio.run(scenario())


def test_the_example_cluster_refuses_clients_without_tls_or_the_password(
    loopback_cluster: tuple[list[str], list[subprocess.Popen[bytes]]],
) -> None:
    """Whoever reaches the port cannot append: plain text and a wrong or missing password are refused,
    while a Stratus part given the URL with the password (over TLS) works."""
    urls, _ = loopback_cluster
    host = urls[0].rsplit("@", 1)[1]

    async def refused(url: str) -> str:
        try:
            nc = await nats.connect(url, connect_timeout=3, allow_reconnect=False, max_reconnect_attempts=0)
        except Exception as e:  # any refusal will do
            return type(e).__name__
        await nc.close()
        return "connected"

    for url in (f"nats://{host}", f"tls://{host}", f"tls://stratus:wrong@{host}"):
        assert asyncio.run(refused(url)) != "connected", url
    # A client that speaks plain text gets the INFO line demanding TLS and nothing else.
    address, port = host.split(":")
    with socket.create_connection((address, int(port)), timeout=5) as sock:
        info = json.loads(sock.recv(65536).split(b" ", 1)[1])
        assert info["tls_required"] is True and info["auth_required"] is True
        connect = b'CONNECT {"user":"stratus","pass":"%s","verbose":true}\r\n' % PASSWORD.encode()
        sock.sendall(connect + b"PUB x 1\r\na\r\n")
        sock.settimeout(5)
        try:
            answer = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            answer = b""
        assert b"+OK" not in answer

    settings = Settings(nats_urls=tuple(urls))
    with NatsBridge(settings.nats_urls, name="deploy-test") as bridge:
        assert bridge.is_connected


def test_stratus_nats_alone_listens_on_loopback_only(tmp_path: Path) -> None:
    """Without a configuration file (and so without authentication), the pinned server stays on
    127.0.0.1 unless told otherwise: an open log is never the default."""
    client, monitor = free_ports(2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "processes.cli", "nats", "--port", str(client), "--monitor-port", str(monitor),
         "--store-dir", str(tmp_path / "store")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{monitor}/varz") as r:
                    varz = json.load(r)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        assert varz["host"] == "127.0.0.1" and varz["port"] == client
        assert varz.get("http_host", "127.0.0.1") == "127.0.0.1"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
