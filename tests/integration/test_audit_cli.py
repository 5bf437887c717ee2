"""``stratus audit`` as an operator runs it: a subprocess against the real JetStream server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from commands.app import Stratus
from commands.flavors.create import CreateFlavor
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer
from stratus.config import Settings
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import Factory, NatsBridge
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.nats import unique_settings

ROOT = Path(__file__).resolve().parents[2]


def audit(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings.to_env()}
    return subprocess.run(
        [sys.executable, "-m", "processes.cli", "audit", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_verify_history_state_usage_export_import(
    bridge: NatsBridge, settings: Settings, tmp_path: Path
) -> None:
    handlers = Handlers(Stratus(Factory(bridge=bridge, settings=settings)))
    with acting(CommandContext(actor=Actor("bob", "p1", ("member",)), request_id="req-audit-cli")):
        handlers.create_flavor(CreateFlavor("1", "m1.tiny", 2, 512, 1))
        server = handlers.create_server(CreateServer("vm", "p1", "bob", "1"))
        created = server.position
        handlers.delete_server(DeleteServer(server.id, "p1"))

    v = audit(settings, "verify")
    assert v.returncode == 0, v.stderr
    assert v.stdout.startswith("OK: ")
    last = int(v.stdout.split("anchor: ")[1].split(":")[0])
    # its progress on standard error, as plain lines (no terminal), the last one at the end
    progress = f"stratus audit verify: {last}/{last} events (100%)"
    assert v.stderr.splitlines()[-1].startswith(progress), v.stderr
    anchor = v.stdout.split("anchor: ")[1].strip()
    assert audit(settings, "verify", "--anchor", anchor).returncode == 0
    wrong = anchor.split(":")[0] + ":" + "f" * 64
    broken = audit(settings, "verify", "--anchor", wrong, "--json")
    assert broken.returncode == 1
    assert "differs from the anchor" in json.loads(broken.stdout)["first_break"]["reason"]

    h = audit(settings, "history", "server", str(server.id), "--json")
    assert h.returncode == 0, h.stderr
    events = [json.loads(line) for line in h.stdout.splitlines()]
    assert events[0]["type"] == "stratus.instance.requested" and events[0]["requestid"] == "req-audit-cli"
    text = audit(settings, "history", "server", str(server.id))
    assert "bob@p1[member]" in text.stdout and "stratus.instance.requested" in text.stdout
    assert audit(settings, "history", "server", "not-a-uuid").returncode != 0

    st = audit(settings, "state", "server", str(server.id), "--as-of", str(created))
    assert st.returncode == 0, st.stderr
    assert json.loads(st.stdout)["state"]["vm_state"] == "building"
    usage = json.loads(audit(settings, "usage", "p1", "--as-of", str(created)).stdout)["usage"]
    assert (usage["instances"], usage["cores"]) == (1, 2)

    dump = tmp_path / "log.jsonl"
    e = audit(settings, "export", "-o", str(dump))
    assert e.returncode == 0, e.stderr
    assert f"stratus audit export: {last} events, " in e.stderr
    target = unique_settings(settings.nats_urls[0])
    i = audit(target, "import", str(dump))
    assert i.returncode == 0, i.stderr
    assert f"stratus audit import: {last} events, " in i.stderr
    try:
        assert audit(target, "verify", "--anchor", anchor).returncode == 0
        again = audit(target, "import", str(dump))
        assert again.returncode == 1 and "refused" in again.stderr
    finally:
        from stratus.eventstore import JetStreamApplicationRecorder

        JetStreamApplicationRecorder.from_settings(bridge, target).delete_stream()
