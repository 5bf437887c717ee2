"""The supervisor with real child processes: small Python programs standing in for the parts."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from processes.supervisor import (
    ChildProcess,
    Part,
    RestartPolicy,
    ServicePart,
    Supervisor,
    tcp_listening,
)
from tests.fixtures.processes import free_port

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for an absent reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_until(condition: object, timeout: float = 10.0) -> bool:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def program(body: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(body)]


# A part that writes its pid, notes the order in which it is stopped, and runs until told to stop.
SERVE = """
    import os, signal, sys, time
    name, journal = sys.argv[1], sys.argv[2]
    def stop(signum, frame):
        with open(journal, "a") as f:
            f.write(name + "\\n")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    with open(journal + "." + name + ".pid", "w") as f:
        f.write(str(os.getpid()))
    print(name, "serving", flush=True)
    while True:
        time.sleep(0.1)
"""


def serving(name: str, journal: Path, **kwargs: object) -> ChildProcess:
    return ChildProcess(name, [*program(SERVE), name, str(journal)], **kwargs)  # type: ignore[arg-type]


def pid_of(journal: Path, name: str) -> int:
    path = Path(f"{journal}.{name}.pid")
    assert wait_until(path.exists)
    assert wait_until(lambda: path.read_text().strip() != "")
    return int(path.read_text())


def test_a_part_that_dies_is_named_with_its_output_and_the_rest_are_stopped(tmp_path: Path) -> None:
    journal = tmp_path / "stopped"
    dying = ChildProcess(
        "scheduler",
        program("""
            import sys, time
            print("placing instances", flush=True)
            time.sleep(1.5)  # the others have installed their SIGTERM handlers by then
            print("Traceback: ConnectionRefusedError", file=sys.stderr, flush=True)
            sys.exit(3)
        """),
    )
    log = io.StringIO()
    sup = Supervisor([serving("api", journal), dying, serving("hypervisor", journal)], log=log)

    started = time.monotonic()
    assert sup.run() == 1
    assert time.monotonic() - started < 10

    assert sup.failure is not None and sup.failure.name == "scheduler"
    report = log.getvalue()
    assert "scheduler exited with status 3 unexpectedly" in report
    assert "placing instances" in report and "ConnectionRefusedError" in report
    # The others were stopped, in reverse order of starting.
    assert journal.read_text().split() == ["hypervisor", "api"]
    assert not alive(pid_of(journal, "api")) and not alive(pid_of(journal, "hypervisor"))


def test_a_part_killed_by_a_signal_is_reported_as_such(tmp_path: Path) -> None:
    victim = ChildProcess("projector", program("import time; time.sleep(60)"))
    log = io.StringIO()
    sup = Supervisor([victim, serving("api", tmp_path / "j")], log=log, on_ready=lambda parts: None)

    def kill_soon() -> None:
        assert wait_until(lambda: victim.pid is not None)
        assert victim.pid is not None
        time.sleep(0.3)
        os.kill(victim.pid, signal.SIGKILL)

    threading.Thread(target=kill_soon, daemon=True).start()
    assert sup.run() == 1
    assert "projector was killed by SIGKILL unexpectedly" in log.getvalue()


def test_a_part_that_fails_to_start_stops_the_group_before_the_later_parts(tmp_path: Path) -> None:
    journal = tmp_path / "stopped"
    never_ready = ChildProcess(
        "api",
        program("import sys; print('Address already in use', flush=True); sys.exit(1)"),
        ready=lambda: False,
    )
    later = serving("projector", journal)
    log = io.StringIO()
    # nats is ready once it has noted its pid, its SIGTERM handler in place (on a loaded machine
    # it could otherwise be stopped before it could note being stopped)
    nats = serving("nats", journal, ready=Path(f"{journal}.nats.pid").exists)
    sup = Supervisor([nats, never_ready, later], log=log)

    assert sup.run() == 1
    assert "api exited with status 1 while starting" in log.getvalue()
    assert "Address already in use" in log.getvalue()
    assert later.pid is None
    assert journal.read_text().split() == ["nats"]


def test_a_part_that_never_becomes_ready_times_out(tmp_path: Path) -> None:
    slow = ChildProcess("api", program("import time; time.sleep(60)"), ready=lambda: False, ready_timeout=0.5)
    log = io.StringIO()
    assert Supervisor([slow], log=log).run() == 1
    assert "api was not ready after 0.5 s" in log.getvalue()
    assert slow.pid is not None and not alive(slow.pid)


def test_readiness_by_listening_port(tmp_path: Path) -> None:
    port = free_port()
    listener = ChildProcess(
        "api",
        program(f"""
            import socket, time
            time.sleep(0.3)
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", {port}))
            s.listen()
            time.sleep(60)
        """),
        ready=tcp_listening(f"127.0.0.1:{port}"),
    )
    seen: list[str] = []

    def on_ready(parts: Sequence[Part]) -> None:
        seen.extend(p.name for p in parts)
        sup.request_stop()

    sup = Supervisor([listener], on_ready=on_ready)
    assert sup.run() == 0
    assert seen == ["api"]
    assert listener.pid is not None and not alive(listener.pid)


def test_a_part_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    stubborn = ChildProcess(
        "hypervisor",
        program("""
            import signal, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            print("ignoring SIGTERM", flush=True)
            time.sleep(60)
        """),
    )
    stop_requested = []

    def stop_once_ignoring(parts: object) -> None:
        assert wait_until(lambda: "ignoring SIGTERM" in stubborn.output_tail())
        stop_requested.append(time.monotonic())
        sup.request_stop()

    sup = Supervisor([stubborn], grace=0.5, on_ready=stop_once_ignoring)
    assert sup.run() == 0
    assert 0.4 < time.monotonic() - stop_requested[0] < 5
    assert stubborn.pid is not None and not alive(stubborn.pid)


def test_stray_processes_left_in_a_parts_group_are_killed(tmp_path: Path) -> None:
    grandchild_pid = tmp_path / "grandchild"
    parent = ChildProcess(
        "api",
        program(f"""
            import subprocess, sys, time
            p = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                  "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"])
            open({str(grandchild_pid)!r}, "w").write(str(p.pid))
            time.sleep(60)
        """),
    )

    def stop_when_forked(parts: object) -> None:
        assert wait_until(lambda: grandchild_pid.exists() and grandchild_pid.read_text() != "")
        sup.request_stop()

    sup = Supervisor([parent], grace=0.5, on_ready=stop_when_forked)
    assert sup.run() == 0
    pid = int(grandchild_pid.read_text())
    assert wait_until(lambda: not alive(pid), timeout=5)


def sleeping_service(name: str) -> tuple[ServicePart, list[subprocess.Popen[bytes]], list[str]]:
    """A server object that manages its own (sleeping) process, as JetStream's and PostgreSQL's do,
    through ServicePart; with the processes it started and its starts and stops."""
    procs: list[subprocess.Popen[bytes]] = []
    events: list[str] = []

    def start() -> None:
        procs.append(subprocess.Popen([PY, "-c", "import time; time.sleep(60)"]))
        events.append("started")

    def stop() -> None:
        procs[-1].terminate()
        procs[-1].wait()
        events.append("stopped")

    service = ServicePart(
        name,
        start=start,
        stop=stop,
        exit_status=lambda: procs[-1].poll(),
        address=lambda: "nats://127.0.0.1:1234",
    )
    return service, procs, events


def test_service_parts_are_watched_and_stopped_like_children(tmp_path: Path) -> None:
    """A server object managing its own process (JetStream, PostgreSQL) fits through ServicePart."""
    service, procs, events = sleeping_service("nats")
    log = io.StringIO()

    def crash_service(parts: object) -> None:
        assert service.address == "nats://127.0.0.1:1234"
        procs[0].kill()

    assert Supervisor([service], log=log, on_ready=crash_service).run() == 1
    assert "nats was killed by SIGKILL unexpectedly" in log.getvalue()
    assert events == ["started", "stopped"]


def test_a_service_that_cannot_start_is_reported(tmp_path: Path) -> None:
    def start() -> None:
        raise OSError("port 4222 is taken")

    service = ServicePart("nats", start=start, stop=lambda: None, exit_status=lambda: None)
    log = io.StringIO()
    assert Supervisor([service], log=log).run() == 1
    assert "nats could not be started: port 4222 is taken" in log.getvalue()


# -- the supervisor as a process of its own, as `stratus run` is -----------------------------------

GROUP = """
    import sys
    from pathlib import Path
    from processes.supervisor import ChildProcess, Supervisor
    journal = Path(sys.argv[1])
    serve = sys.argv[2]
    names = ("nats", "api", "worker")
    parts = [ChildProcess(n, [sys.executable, "-c", serve, n, str(journal)]) for n in names]
    def ready(parts):
        print("READY", flush=True)
    sys.exit(Supervisor(parts, grace=2, on_ready=ready).run())
"""


def start_group(journal: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*program(GROUP), str(journal), textwrap.dedent(SERVE)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # As in a terminal: the supervisor leads a process group of its own.
        start_new_session=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "READY":
            break
    else:
        pytest.fail(f"the group did not start (status {proc.wait()})")
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_every_part_in_reverse_order_and_exits_zero(tmp_path: Path, sig: int) -> None:
    journal = tmp_path / "stopped"
    proc = start_group(journal)
    pids = [pid_of(journal, n) for n in ("nats", "api", "worker")]
    proc.send_signal(sig)
    assert proc.wait(timeout=20) == 0
    assert journal.read_text().split() == ["worker", "api", "nats"]
    assert not any(alive(pid) for pid in pids)


def test_ctrl_c_in_a_terminal_reaches_only_the_supervisor(tmp_path: Path) -> None:
    """The terminal signals the whole foreground group; the parts, in groups of their own, wait their turn."""
    journal = tmp_path / "stopped"
    proc = start_group(journal)
    pids = [pid_of(journal, n) for n in ("nats", "api", "worker")]
    assert all(os.getpgid(pid) != proc.pid for pid in pids)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=20) == 0
    assert journal.read_text().split() == ["worker", "api", "nats"]


def test_parts_do_not_outlive_a_killed_supervisor(tmp_path: Path) -> None:
    journal = tmp_path / "stopped"
    proc = start_group(journal)
    pids = [pid_of(journal, n) for n in ("nats", "api", "worker")]
    proc.kill()
    proc.wait()
    assert wait_until(lambda: not any(alive(pid) for pid in pids), timeout=10)


def test_the_report_names_the_first_error_when_the_tail_would_hide_it() -> None:
    noisy = ChildProcess(
        "api",
        program("""
            import sys
            print("ModuleNotFoundError: No module named 'api.app'", flush=True)
            for i in range(100):
                print(f"  File 'arbiter.py', line {i}, in halt", flush=True)
            sys.exit(1)
        """),
    )
    log = io.StringIO()
    assert Supervisor([noisy], settle=5.0, log=log).run() == 1
    report = log.getvalue()
    assert "(first error: ModuleNotFoundError: No module named 'api.app')" in report
    assert "line 99, in halt" in report and "line 50, in halt" not in report


def test_on_ready_waits_until_parts_have_settled() -> None:
    quitter = ChildProcess("projector", program("import time, sys; time.sleep(0.5); sys.exit(2)"))
    ready: list[object] = []
    log = io.StringIO()
    assert Supervisor([quitter], settle=3.0, log=log, on_ready=ready.append).run() == 1
    assert ready == []
    assert "projector exited with status 2 unexpectedly" in log.getvalue()


def test_a_part_that_cannot_be_stopped_does_not_keep_the_others_running(tmp_path: Path) -> None:
    journal = tmp_path / "stopped"

    def refuse() -> None:
        raise OSError("pg_ctl: cannot stop server")

    stuck = ServicePart("postgres", start=lambda: None, stop=refuse, exit_status=lambda: None)
    log = io.StringIO()

    def stop_when_serving(parts: object) -> None:
        pid_of(journal, "api")  # its SIGTERM handler is in place
        sup.request_stop()

    sup = Supervisor(
        [serving("nats", journal), stuck, serving("api", journal)], log=log, on_ready=stop_when_serving
    )
    assert sup.run() == 1
    assert "postgres could not be stopped: pg_ctl: cannot stop server" in log.getvalue()
    assert journal.read_text().split() == ["api", "nats"]


# -- restarts: a part that dies comes back; only a crash loop stops the group -----------------------

QUICK = RestartPolicy(backoff=0.05, max_backoff=1.0, crash_loop_deaths=3, crash_loop_window=600.0)


def test_a_part_killed_with_sigkill_is_restarted_and_the_others_keep_running(tmp_path: Path) -> None:
    journal = tmp_path / "stopped"
    log = io.StringIO()
    seen: dict[str, int] = {}

    def kill_projector_then_stop(parts: object) -> None:
        def chaos() -> None:
            try:
                seen["api"], seen["first"] = pid_of(journal, "api"), pid_of(journal, "projector")
                os.kill(seen["first"], signal.SIGKILL)
                pid_file = Path(f"{journal}.projector.pid")
                assert wait_until(lambda: pid_file.read_text().strip() not in ("", str(seen["first"])))
                seen["second"] = pid_of(journal, "projector")
                assert wait_until(lambda: sup.restarts["projector"] == 1)
            finally:
                sup.request_stop()

        threading.Thread(target=chaos, daemon=True).start()

    sup = Supervisor(
        [serving("api", journal), serving("projector", journal)],
        log=log,
        on_ready=kill_projector_then_stop,
        restart=QUICK,
    )
    assert sup.run() == 0, log.getvalue()

    report = log.getvalue()
    assert "projector was killed by SIGKILL unexpectedly; restarting it in 0.05 s" in report
    assert "projector restarted (restart 1)" in report
    assert "stopping the other parts" not in report
    assert sup.restarts == {"projector": 1} and sup.failure is None
    # The restarted projector is a new process; the API was never touched; both stopped at the end.
    assert seen["second"] != seen["first"]
    assert journal.read_text().split() == ["projector", "api"]
    assert not alive(seen["api"]) and not alive(seen["second"])


def test_a_part_that_always_dies_stops_the_group_as_a_crash_loop(tmp_path: Path) -> None:
    journal = tmp_path / "stopped"
    dying = ChildProcess(
        "scheduler",
        program("""
            import sys
            print("cannot reach JetStream", flush=True)
            sys.exit(3)
        """),
    )
    log = io.StringIO()
    sup = Supervisor([serving("api", journal), dying], log=log, restart=QUICK)

    assert sup.run() == 1
    report = log.getvalue()
    # Each death is named with its status, and the backoff doubles: 0.05 s, then 0.1 s.
    assert "scheduler exited with status 3 unexpectedly; restarting it in 0.05 s (death 1 of 3" in report
    assert "scheduler exited with status 3 unexpectedly; restarting it in 0.1 s (death 2 of 3" in report
    assert (
        "stratus: scheduler exited with status 3 unexpectedly: 3 deaths within 600 s, a crash loop; "
        "stopping the other parts." in report
    )
    assert "cannot reach JetStream" in report
    assert sup.failure is not None and sup.failure.name == "scheduler"
    assert sup.restarts["scheduler"] == 2
    assert journal.read_text().split() == ["api"]
    assert not alive(pid_of(journal, "api"))


def test_a_dead_service_part_is_stopped_and_started_again(tmp_path: Path) -> None:
    """A server object managing its own process (JetStream, PostgreSQL) restarts through ServicePart."""
    service, procs, events = sleeping_service("nats")
    log = io.StringIO()

    def crash_then_stop(parts: object) -> None:
        def chaos() -> None:
            try:
                procs[0].kill()
                assert wait_until(lambda: sup.restarts["nats"] == 1)
            finally:
                sup.request_stop()

        threading.Thread(target=chaos, daemon=True).start()

    sup = Supervisor([service], log=log, on_ready=crash_then_stop, restart=QUICK)
    assert sup.run() == 0, log.getvalue()
    assert "nats was killed by SIGKILL unexpectedly; restarting it in 0.05 s" in log.getvalue()
    assert events == ["started", "stopped", "started", "stopped"]
    assert len(procs) == 2 and procs[1].poll() is not None
