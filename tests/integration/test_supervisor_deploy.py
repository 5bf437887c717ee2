"""deploy/: the example JetStream cluster configuration works, on three loopback nodes, and is closed:
clients connect over TLS as the NKey users `stratus trust init` generates (docs/trust.md), routes
need a certificate from the deployment's CA."""

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

from processes import trust
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from stratus.eventstore.bridge import Client
from stratus.natsserver import binary
from stratus.trust.nkeys import KeyPair
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


def users(directory: Path) -> Path:
    """``<directory>/trust``: the identities `stratus trust init --host compute-1` generates, and the
    users file the node configurations include (``trust/nats.conf``, beside them)."""
    trust.prepare(Settings(), directory / "trust", hosts=["compute-1"])
    return directory / "trust"


def test_there_are_three_node_configs_that_the_pinned_server_accepts(tmp_path: Path) -> None:
    assert [c.name for c in CONFIGS] == ["nats-1.conf", "nats-2.conf", "nats-3.conf"]
    tls = write_test_pki(tmp_path / "tls")
    users(tmp_path)
    env = {"PATH": "/usr/bin:/bin"}
    for conf in CONFIGS:
        local = tmp_path / conf.name
        local.write_text(conf.read_text().replace("/etc/stratus/tls", str(tls)))
        done = subprocess.run(
            [str(binary()), "-t", "-c", str(local)], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_example_configs_refuse_to_start_open() -> None:
    """Without its certificates and users a node does not start: it never falls back to an open port."""
    for conf in CONFIGS:
        done = subprocess.run(
            [str(binary()), "-t", "-c", str(conf)], capture_output=True, text=True, env={"PATH": "/bin"}
        )
        assert done.returncode != 0
        text = conf.read_text()
        assert "allow_non_tls: false" in text and 'include "trust/nats.conf"' in text
        assert "password" not in text  # NKey users only
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
) -> Iterator[tuple[list[str], list[subprocess.Popen[bytes]], Path]]:
    """The three example nodes on loopback: same files, ports and paths rewritten, a test CA's
    certificates in place of /etc/stratus/tls, generated users beside the files; clients trust that
    CA through ``SSL_CERT_FILE``, as deploy/systemd/stratus.env.example has the parts do. Yields
    client URLs, the node processes and the directory of the identities' seeds."""
    tls = write_test_pki(tmp_path / "tls")
    seeds = users(tmp_path)
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
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=dict(os.environ),
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
        yield [f"tls://127.0.0.1:{p}" for p in client], procs, seeds
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
    loopback_cluster: tuple[list[str], list[subprocess.Popen[bytes]], Path],
) -> None:
    urls, procs, seeds = loopback_cluster
    admin = trust.seed_file(seeds, "admin").read_text().strip()

    async def scenario() -> None:
        nc = Client()
        await nc.connect(servers=urls, connect_timeout=5, nkeys_seed_str=admin)
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


def test_the_example_cluster_refuses_clients_without_tls_or_their_key(
    loopback_cluster: tuple[list[str], list[subprocess.Popen[bytes]], Path],
) -> None:
    """Whoever reaches the port cannot append: plain text, no credentials and a key that is not one
    of the deployment's are refused, while a Stratus part given its seed (over TLS) works."""
    urls, _, seeds = loopback_cluster
    host = urls[0].split("://", 1)[1]

    async def refused(url: str, seed: str | None = None) -> str:
        nc = Client()
        credentials = {"nkeys_seed_str": seed} if seed is not None else {}
        try:
            await nc.connect(
                servers=[url], connect_timeout=3, allow_reconnect=False, max_reconnect_attempts=0,
                **credentials,  # type: ignore[arg-type]
            )  # fmt: skip
        except Exception as e:  # any refusal will do
            return type(e).__name__
        await nc.close()
        return "connected"

    for url, seed in (
        (f"nats://{host}", None),
        (f"tls://{host}", None),
        (f"tls://{host}", KeyPair.generate().seed),
    ):
        assert asyncio.run(refused(url, seed)) != "connected", url
    # A client that speaks plain text gets the INFO line demanding TLS and nothing else.
    address, port = host.split(":")
    with socket.create_connection((address, int(port)), timeout=5) as sock:
        info = json.loads(sock.recv(65536).split(b" ", 1)[1])
        assert info["tls_required"] is True and info["auth_required"] is True and info.get("nonce")
        sock.sendall(b'CONNECT {"verbose":true}\r\nPUB x 1\r\na\r\n')
        sock.settimeout(5)
        try:
            answer = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            answer = b""
        assert b"+OK" not in answer

    with NatsBridge(urls, name="deploy-test", seed_file=trust.seed_file(seeds, "api")) as bridge:
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
