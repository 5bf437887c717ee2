"""Each part run as a process says what it is doing on standard error (INFO and above, with time and
logger), as the API, the projector and the notifier always did: the scheduler's and the hypervisor
worker's INFO lines were lost, so an operator saw only their warnings."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commands.app import Stratus
from stratus.config import Settings


@pytest.mark.parametrize("part", ["scheduler", "hypervisor"])
def test_the_part_logs_its_info_lines(part: str, app: Stratus, settings: Settings, tmp_path: Path) -> None:
    env = {**os.environ, **settings.to_env(), "STRATUS_DATA_DIR": str(tmp_path)}
    log = tmp_path / f"{part}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "stratus"), part],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            # its own line (the first INFO line may be its probes' address: stratus.health)
            mine = f"workers.{part} INFO "
            while mine not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    info = [line for line in text.splitlines() if f"workers.{part} INFO " in line]
    assert info, text[-2000:]
    assert info[0][:4].isdigit(), info[0]  # a time and the logger's name
