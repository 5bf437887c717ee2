"""The ``stratus`` command: its settings, the single-part commands, and ``stratus run`` as a group."""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from processes import cli, devrun
from processes.conformance import own_listeners
from stratus.natsserver import binary
from stratus.postgres import EmbeddedPostgres
from tests.fixtures.identity import password_auth
from tests.fixtures.processes import free_port, free_ports_in_a_row

ROOT = Path(__file__).resolve().parents[2]
STRATUS = [sys.executable, "-m", "processes.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without Stratus settings, so that a test decides them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATUS_") and k != "DATABASE_URL"}
    env.update(extra)
    return env


def nats_servers_using(store: Path) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"nats-server") and str(store).encode() in argv:
            pids.append(int(cmdline.parent.name))
    return pids


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATUS_API_BIND", "0.0.0.0:9000")
    monkeypatch.setenv("STRATUS_HOST_NAME", "from-env")
    args = argparse.Namespace(
        data_dir="/srv/stratus",
        nats_url="nats://a:4222, nats://b:4222",
        database_url=None,
        api_bind=None,
        api_workers=4,
        host_name=None,
        libvirt_uri=None,
    )
    s = cli._settings(args)
    assert s.data_dir == Path("/srv/stratus")
    assert s.nats_urls == ("nats://a:4222", "nats://b:4222")
    assert s.api_bind == "0.0.0.0:9000" and s.api_workers == 4 and s.host_name == "from-env"


def test_client_address_of_a_wildcard_bind() -> None:
    assert devrun.client_address("0.0.0.0:8774") == "127.0.0.1:8774"
    assert devrun.client_address("[::]:8774") == "[::1]:8774"
    assert devrun.client_address("10.0.0.5:8774") == "10.0.0.5:8774"


def test_test_command_hands_every_argument_to_pytest() -> None:
    done = subprocess.run([*STRATUS, "test", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "pytest" in done.stdout + done.stderr


def test_no_command_prints_help() -> None:
    done = subprocess.run(STRATUS, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "run" in done.stdout and "hypervisor" in done.stdout


def test_nats_command_runs_the_pinned_server_in_the_foreground(tmp_path: Path) -> None:
    port, monitor = free_ports_in_a_row(3), free_port()
    proc = subprocess.Popen(
        [
            *STRATUS,
            "nats",
            "--address",
            "127.0.0.1",
            "--port",
            str(port),
            "--monitor-port",
            str(monitor),
            "--store-dir",
            str(tmp_path / "js"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{monitor}/healthz?js-enabled-only=true") as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        # exec'd: the server itself is the process a service manager signals.
        assert Path(f"/proc/{proc.pid}/exe").resolve().name == "nats-server"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    assert (tmp_path / "js" / "jetstream").is_dir()


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_run_reports_a_part_that_cannot_start_and_stops_the_servers(
    pg_tmp_path: Path, taken_port: int
) -> None:
    data = pg_tmp_path / "data"
    done = subprocess.run(
        [*STRATUS, "run", "--data-dir", str(data), "--api-bind", f"127.0.0.1:{taken_port}", "--grace", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
        cwd=pg_tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert "stratus: api exited with status" in done.stderr
    assert "last lines of api's output" in done.stderr
    assert "Stratus is running" not in done.stdout
    # The servers started before it were stopped again.
    assert not EmbeddedPostgres(data / "pg").is_running()
    assert nats_servers_using(data / "nats") == []


PARTS_PRESENT = all(
    importlib.util.find_spec(module) is not None
    for module in ("api.app", "projections.runner", "workers.scheduler", "workers.hypervisor")
)


@pytest.mark.slow
@pytest.mark.skipif(not PARTS_PRESENT, reason="not every part of the control plane exists yet")
def test_run_starts_the_control_plane_and_stops_it_on_sigterm(pg_tmp_path: Path) -> None:
    data, port = pg_tmp_path / "data", free_ports_in_a_row(3)
    listeners = own_listeners(free_port)  # beside any other run on the machine
    serial, novnc = listeners["STRATUS_SERIALPROXY_BIND"], listeners["STRATUS_NOVNCPROXY_BIND"]
    listeners.pop("STRATUS_WATCH_BIND")  # the banner's is the API's port + 1
    listeners.pop("STRATUS_METADATA_BIND")
    proc = subprocess.Popen(
        [*STRATUS, "run", "--data-dir", str(data), "--api-bind", f"127.0.0.1:{port}", "--hosts", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=clean_env(**listeners),
        cwd=pg_tmp_path,
    )
    assert proc.stdout is not None
    output = []
    try:
        for line in proc.stdout:
            output.append(line)
            if line.startswith("Ctrl-C stops everything"):
                break
        else:
            pytest.fail("stratus run stopped before it was ready:\n" + "".join(output[-60:]))
        banner = "".join(output)
        parts = ("nats", "postgres", "identity", "api", "projector", "scheduler", "hypervisor")
        for part in (*parts, "notifier", "watch", "simulate", "metadata", "serialproxy", "novncproxy"):
            assert f"  {part} " in banner
        # the console proxies listen where the URLs the API answers point: a plain GET is 426 (not
        # a websocket; no token spent), or noVNC's page where the novnc package is installed
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{serial}/?token=x")
        assert refused.value.code == 426
        try:
            with urllib.request.urlopen(f"http://{novnc}/vnc_lite.html?token=x") as page:
                assert b"noVNC" in page.read()
        except urllib.error.HTTPError as e:
            assert e.code == 426 and not Path("/usr/share/novnc/vnc_lite.html").exists()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as r:
            assert r.status == 200
        # The first run generated the admin's password and printed it in the OS_* variables: it works.
        assert f"export OS_AUTH_URL=http://127.0.0.1:{port}/identity/v3" in banner
        match = re.search(r"export OS_PASSWORD=(\S+)", banner)
        assert match is not None, banner
        password = match.group(1)
        assert _token(port, password)
        # The banner's commands, pasted into a shell, work: the server reaches ACTIVE.
        commands = [line.strip() for line in banner.splitlines() if line.startswith("  export OS_")]
        commands += [
            line.strip() for line in banner.splitlines() if line.startswith(("  openstack ", "  head "))
        ]
        script = " && ".join(commands)
        shell_env = {k: v for k, v in clean_env().items() if not k.startswith("OS_")}
        shell_env.update(HOME=str(pg_tmp_path), PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
        argv = ["bash", "-c", script]
        where = {"env": shell_env, "cwd": pg_tmp_path}
        done = subprocess.run(argv, **where, capture_output=True, text=True, timeout=300)  # type: ignore[call-overload]
        assert done.returncode == 0, done.stderr[-3000:]
        assert "vm1" in done.stdout and "ACTIVE" in done.stdout, done.stdout[-3000:]
        # --hosts 2: two simulated hosts beside compute-1, for room.
        hypervisors = urllib.request.Request(
            f"http://127.0.0.1:{port}/v2.1/os-hypervisors", headers={"X-Auth-Token": _token(port, password)}
        )
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(hypervisors) as r:
                names = sorted(h["hypervisor_hostname"] for h in json.load(r)["hypervisors"])
            if len(names) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert names == ["compute-1", "sim-00001", "sim-00002"]
        # The event stream beside the API (port + 1) replays the server's life from the start.
        watch = urllib.request.Request(
            f"http://127.0.0.1:{port + 1}/v2.1/stratus/events?type=server&after=0",
            headers={"X-Auth-Token": _token(port, password)},
        )
        seen: list[bytes] = []
        with urllib.request.urlopen(watch, timeout=30) as stream:
            while not seen or not seen[-1].startswith(b"event: stratus.instance.spawned"):
                seen.append(stream.readline())
                assert seen[-1] and len(seen) < 200, seen
        # A part killed outright comes back, named with how it died; the others run on.
        (projector,) = children_of(proc.pid, "projector")
        os.kill(projector, signal.SIGKILL)
        for line in proc.stdout:
            output.append(line)
            if line.startswith("stratus: projector restarted"):
                break
        restarted = "".join(output)
        assert "stratus: projector was killed by SIGKILL unexpectedly; restarting it in 1 s" in restarted
        assert children_of(proc.pid, "projector") not in ([], [projector])
        assert _token(port, password)
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest[-3000:]
    # Shown once, in the banner, and in no part's output.
    assert banner.count(password) == 1 and password not in rest
    assert not EmbeddedPostgres(data / "pg").is_running()
    assert nats_servers_using(data / "nats") == []


def children_of(parent: int, part: str) -> list[int]:
    """The pids of ``stratus <part>`` processes whose parent is ``parent`` (a ``stratus run``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"processes.cli" in argv and part.encode() in argv:
            found.append(int(stat.parent.name))
    return found


def _token(port: int, password: str) -> str:
    """An admin token, once the projector has applied the seed (a moment after the banner)."""
    body = json.dumps(password_auth("admin", password, "admin")).encode()
    deadline = time.monotonic() + 20
    while True:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/identity/v3/auth/tokens",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req) as r:
                assert r.status == 201
                return str(r.headers["X-Subject-Token"])
        except urllib.error.HTTPError as e:
            assert e.code in (401, 503) and time.monotonic() < deadline, e.read()
            time.sleep(0.2)


def test_one_run_per_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "run.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242\n")
        held.flush()
        done = subprocess.run(
            [*STRATUS, "run", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(),
            cwd=tmp_path,
        )
    assert done.returncode == 1
    assert "is in use by another `stratus run` (pid 4242)" in done.stderr


def test_a_killed_run_leaves_no_server_and_a_stray_one_is_stopped(pg_tmp_path: Path, taken_port: int) -> None:
    data = pg_tmp_path / "data"
    argv = [*STRATUS, "run", "--data-dir", str(data), "--api-bind", f"127.0.0.1:{taken_port}"]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env())
    deadline = time.monotonic() + 30
    while not nats_servers_using(data / "nats"):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    first.kill()
    first.wait()
    # the server dies with the run that started it
    deadline = time.monotonic() + 15
    while nats_servers_using(data / "nats") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert nats_servers_using(data / "nats") == []

    # a server on the store that no run owns (started by hand, or by an older version) is stopped
    stray = subprocess.Popen(
        [str(binary()), "-js", "-sd", str(data / "nats"), "-a", "127.0.0.1", "-p", "-1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=clean_env(), cwd=pg_tmp_path
        )
        assert f"stopping nats-server (pid {stray.pid}) left over from an earlier run" in done.stderr
        assert nats_servers_using(data / "nats") == [], done.stderr
    finally:
        stray.kill()
        stray.wait()
    EmbeddedPostgres(data / "pg").stop()
