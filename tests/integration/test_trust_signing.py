"""Every event signed by who appended it; the projector and ``stratus audit verify`` refuse the rest.

The issue's attack: with a working NATS connection, append ``Project.RoleGranted`` (admin for a
member) stamped with the real admin as actor. Here it is appended through a connection the server
accepts (the operator's, so that it reaches the log at all: the test of NATS permissions is
test_nats_trust.py), once unsigned and once signed with a compute host's key. The projector
quarantines both and applies the API's genuine grant; ``audit verify``'s signature pass names the
first refused event.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import libvirt
import pytest

from commands.app import Stratus
from commands.exclusions import Exclusions
from commands.hosts.register import RegisterHost
from commands.identity import Project
from commands.instance import Instance
from commands.network import FixedNetwork
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.groups import CreateServerGroup
from commands.servers.moves import (
    ConfirmResize,
    FailMigration,
    FinishMigration,
    FinishRevert,
    LeftDest,
    LeftSource,
    MigrateServer,
    ResizeServer,
    RevertResize,
    ScheduleMigration,
)
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from processes import trust
from projections import queries
from projections.projector import Projector
from projections.rebuild import rebuild
from stratus.audit import signatures
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import Factory, JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore.envelope import decode_message
from stratus.eventstore.signing import SIGNER, Signer, UntrustedEvent, Verifier
from stratus.eventstore.snapshot_stream import JetStreamSnapshotRecorder
from stratus.eventstore.snapshots import AnchoredRecorder, Snapshot
from stratus.eventstore.subjects import SubjectLayout
from stratus.quarantine import Quarantine, Quarantined
from tests.fixtures.commands import M1_SMALL, M1_THREE, make_app
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.hypervisor import FAST_RETRY, registered, settled
from tests.fixtures.projections import public_image, read_models
from tests.fixtures.trust import HOSTS, Trusted
from tests.fixtures.workers import Worker, eventually
from workers import hypervisor
from workers import scheduler as scheduler_worker
from workers.host_feed import HostFeed
from workers.host_view import HostView
from workers.libvirt_driver import LibvirtDriver
from workers.reconcile import Reconciler

ADMIN = Actor(user_id="the-real-admin", project_id="admin", roles=("admin",))


@pytest.fixture
def signed_log(trusted: Trusted) -> Trusted:
    """The deployment with its signing cut-over at the log's first position."""
    trust.cut_over(trusted.directory, lambda: 0)
    return trusted


def _grant(app: Stratus, project: Project, user: str, role: str) -> Any:
    """``project`` with ``user`` granted ``role``, as a stored event not yet appended."""
    project._role_granted(user, role)
    (pending,) = project.collect_events()
    return app.mapper.to_stored_event(pending)


def signing_parts(signed_log: Trusted, operator: NatsBridge) -> Callable[[str], Handlers]:
    """Handlers that sign as the part named (``api``, ``scheduler``, ``host:<name>``), publishing
    through the ``operator``'s connection (NATS lets it publish; each app signs as its part)."""

    def part(name: str) -> Handlers:
        return Handlers(make_app(operator, signed_log.as_part(name)))

    return part


def two_hosts(signed_log: Trusted, operator: NatsBridge) -> tuple[Handlers, Handlers, dict[str, Handlers]]:
    """The API, the scheduler and each of ``HOSTS`` as signing parts; the flavor and both hosts made."""
    part = signing_parts(signed_log, operator)
    api, scheduler = part("api"), part("scheduler")
    compute = {h: part(f"host:{h}") for h in HOSTS}
    api.create_flavor(M1_SMALL)
    for h in HOSTS:
        api.register_host(RegisterHost(h, 4, 8192, 100))
    return api, scheduler, compute


def test_the_recorder_signs_with_the_parts_key(signed_log: Trusted) -> None:
    app = make_app(signed_log.bridge("api"), signed_log.as_part("api"))
    project = Project(project_id=uuid4().hex, name="p", domain_id="default", description="", enabled=True)
    app.save(project)

    (msg,) = app.recorder.read_messages(1, 10)  # type: ignore[attr-defined]

    api = signed_log.registry.current("api")
    assert api is not None and (msg.headers or {})[SIGNER] == api.public_key
    verifier = Verifier.load(signed_log.settings.trust_registry)
    assert verifier is not None and verifier.refusal(msg.headers or {}, bytes(msg.data), 1) is None


def test_a_forged_role_grant_is_quarantined_and_reported(signed_log: Trusted, database_url: str) -> None:
    api_settings = signed_log.as_part("api")
    app = make_app(signed_log.bridge("api"), api_settings)
    operator = signed_log.bridge("admin")
    project_id = uuid4().hex
    with acting(CommandContext(actor=ADMIN)):
        project = Project(project_id=project_id, name="p", domain_id="default", description="", enabled=True)
        project._role_granted("member-user", "member")
        app.save(project)  # positions 1, 2: the API's, signed
        unsigned = JetStreamApplicationRecorder.from_settings(operator, signed_log.settings)
        unsigned.insert_events([_grant(app, project, "member-user", "admin")])  # 3: nobody's signature
        host_key = Signer.from_seed_file(trust.seed_file(signed_log.directory, "host:compute-1"))
        by_host = JetStreamApplicationRecorder.from_settings(operator, signed_log.settings, signer=host_key)
        by_host.insert_events([_grant(app, project, "member-user", "manager")])  # 4: a host's

    quarantine = Quarantine(operator, log_stream=signed_log.settings.stream)
    trust_check = Verifier.load(signed_log.settings.trust_registry)
    with read_models(database_url) as conn:
        projector = Projector(app.recorder, app.mapper, conn, quarantine=quarantine, trust=trust_check)  # type: ignore[arg-type]
        assert projector.catch_up() == 4
        rows = conn.execute(
            "SELECT role_id FROM stratus_rm.role_assignments WHERE project_id = %s", (project_id,)
        ).fetchall()

    assert [r[0] for r in rows] == ["member"]
    records = quarantine.list("projector")
    assert [(r.position, r.error) for r in records] == [(3, "UntrustedEvent"), (4, "UntrustedEvent")]
    assert (
        "unsigned" in records[0].reason
        and "host:compute-1 (host) may not append project" in records[1].reason
    )

    assert trust_check is not None
    report = signatures.verify(
        signed_log.settings.nats_urls, signed_log.settings.stream, signed_log.settings.subject_prefix,
        trust_check, seed_file=trust.seed_file(signed_log.directory, "auditor"),
    )  # fmt: skip
    assert (report.signed, report.unsigned, report.refused) == (2, 0, 2)
    assert report.first_refused is not None and report.first_refused.position == 3
    assert dict(report.by_identity) == {"api": 2}


def test_a_host_key_on_another_hosts_server_is_refused(signed_log: Trusted, database_url: str) -> None:
    """A host's key may append its own servers' events only: compute-2's ``Spawned`` of a server on
    compute-1, and compute-1's ``Deleted`` of a server on compute-2, are quarantined by the projector
    (one that starts half-way, from its tracking position, as well) and by a rebuild, and refused by
    ``audit verify``; the servers' rows are as their own hosts left them."""
    operator = signed_log.bridge("admin")
    api, scheduler, compute = two_hosts(signed_log, operator)
    image = public_image(api.app)
    a, b = (api.create_server(CreateServer(n, "p1", "u1", "small", image_ref=image)).id for n in "ab")
    scheduler.place_instance(PlaceInstance(a, "compute-1"))
    scheduler.place_instance(PlaceInstance(b, "compute-2"))
    compute["compute-1"].start_spawning(StartSpawning(a, "compute-1"))
    forged_spawn = compute["compute-2"].finish_spawning(FinishSpawning(a, 1)).position
    compute["compute-2"].start_spawning(StartSpawning(b, "compute-2"))
    compute["compute-2"].finish_spawning(FinishSpawning(b, 1))
    server_b: Instance = compute["compute-1"].app.repository.get(UUID(b))
    assert isinstance(server_b, Instance)
    server_b.mark_deleted()
    forged_delete = compute["compute-1"].app.save(server_b)[-1].notification.id

    quarantine = Quarantine(operator, log_stream=signed_log.settings.stream)
    verifier = Verifier.load(signed_log.settings.trust_registry)
    log = api.app.recorder
    with read_models(database_url) as conn:
        first = Projector(log, api.app.mapper, conn, quarantine=quarantine, trust=verifier)  # type: ignore[arg-type]
        first.catch_up(until=forged_spawn)
        # a projector started afterwards folds where the servers are from the log before its position
        later = Projector(log, api.app.mapper, conn, quarantine=quarantine, trust=verifier)  # type: ignore[arg-type]
        assert later.catch_up() == forged_delete

        def rows() -> list[tuple[str, str | None, str, bool]]:
            found = [queries.get_server(conn, s, None) for s in (a, b)]
            return [(r["vm_state"], r["task_state"], r["host"], r["deleted"]) for r in found if r]

        live = rows()
        assert live == [("building", "spawning", "compute-1", False), ("active", None, "compute-2", False)]
        rebuild(conn, log, api.app.mapper, quarantine=quarantine, trust=verifier)  # type: ignore[arg-type]
        assert rows() == live

    for part_name in ("projector", "rebuild"):
        records = quarantine.list(part_name)
        assert [(r.position, r.error) for r in records] == [
            (forged_spawn, "UntrustedEvent"), (forged_delete, "UntrustedEvent"),
        ]  # fmt: skip
        assert f"host:compute-2 (host) may not append spawned of server {a}: it is on compute-1" in (
            records[0].reason
        )
        assert "host:compute-1 (host) may not append deleted" in records[1].reason

    assert verifier is not None
    s = signed_log.settings
    auditor = trust.seed_file(signed_log.directory, "auditor")
    report = signatures.verify(s.nats_urls, s.stream, s.subject_prefix, verifier, seed_file=auditor)
    assert report.refused == 2 and report.first_refused is not None
    assert report.first_refused.position == forged_spawn
    assert report.by_identity["host:compute-1"] == 1 and report.by_identity["host:compute-2"] == 2


def test_a_hypervisor_worker_acts_only_on_events_whose_signer_may_append_them(
    signed_log: Trusted, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    """A ``Scheduled`` signed by another host's key, and one signed by no one after the cut-over,
    are quarantined by compute-1's worker (running as host:compute-1 on the trusted server) and
    never acted on; the scheduler's own placement is spawned."""
    operator = signed_log.bridge("admin")

    def part(name: str | None) -> Handlers:
        settings = signed_log.as_part(name) if name else signed_log.settings  # None: signs nothing
        return Handlers(make_app(operator, settings))

    host_settings = dataclasses.replace(signed_log.as_part("host:compute-1"), host_name="compute-1")
    host_bridge = signed_log.bridge("host:compute-1")
    worker = Worker(
        lambda stop: hypervisor.run(
            host_settings, bridge=host_bridge, app=make_app(host_bridge, host_settings),
            driver=LibvirtDriver(lambda: conn, instances_path=tmp_path), stop=stop,
            instances_path=tmp_path / "instances", retry=FAST_RETRY, poll=0.1,
        )
    )  # fmt: skip
    try:
        api = part("api")
        api.create_flavor(M1_SMALL)
        eventually(lambda: registered(api, "compute-1"))
        forged, unsigned, genuine = (
            api.create_server(CreateServer(n, "p1", "u1", "small")).id
            for n in ("forged", "unsigned", "genuine")
        )
        part("host:compute-2").place_instance(PlaceInstance(forged, "compute-1"))
        part(None).place_instance(PlaceInstance(unsigned, "compute-1"))
        part("scheduler").place_instance(PlaceInstance(genuine, "compute-1"))
        placed = {s: api.instance(s).version for s in (forged, unsigned)}

        assert eventually(lambda: settled(api, genuine)).vm_state == "active"
        quarantine = Quarantine(operator, log_stream=signed_log.settings.stream)

        def both_quarantined() -> list[Quarantined] | None:
            found = quarantine.list(hypervisor.durable_name("compute-1"))
            return found if len(found) >= 2 else None

        records = eventually(both_quarantined)
    finally:
        worker.close()

    assert sorted((r.originator_id, r.error) for r in records) == sorted(
        [(forged, "UntrustedEvent"), (unsigned, "UntrustedEvent")]
    )
    by_reason = {r.originator_id: r.reason for r in records}
    assert "host:compute-2 (host) may not append instance." in by_reason[forged]
    assert "unsigned" in by_reason[unsigned]
    assert {s: api.instance(s).version for s in placed} == placed  # no step, no fault: not acted on
    assert {d.UUIDString() for d in conn.listAllDomains()} == {genuine}


def test_a_log_from_before_signing_verifies_as_unsigned_up_to_the_cut_over(trusted: Trusted) -> None:
    """Old logs: events before the cut-over are reported unsigned, not refused; after it, refused."""
    operator = trusted.bridge("admin")
    unsigned = JetStreamApplicationRecorder.from_settings(operator, trusted.settings)
    unsigned.ensure_stream()
    app = make_app(operator, trusted.settings)
    for _ in range(2):
        project = Project(project_id=uuid4().hex, name="p", domain_id="default", description="", enabled=True)
        unsigned.insert_events([app.mapper.to_stored_event(e) for e in project.collect_events()])
    trust.cut_over(trusted.directory, lambda: unsigned.max_notification_id() or 0)
    late = Project(project_id=uuid4().hex, name="p", domain_id="default", description="", enabled=True)
    unsigned.insert_events([app.mapper.to_stored_event(e) for e in late.collect_events()])

    verifier = Verifier.load(trusted.settings.trust_registry)
    assert verifier is not None and verifier.registry.signed_from == 3
    s = trusted.settings
    report = signatures.verify(
        s.nats_urls, s.stream, s.subject_prefix, verifier, seed_file=trusted.as_part("auditor").nats_seed_file
    )
    assert (report.signed, report.unsigned, report.refused) == (0, 2, 1)
    assert report.first_refused is not None and report.first_refused.position == 3


def test_rotation_retires_the_old_key_from_the_logs_head_on(signed_log: Trusted) -> None:
    """The old key verifies what it signed before the rotation; an event it signs afterwards (a
    stolen key, or a part not restarted with its new seed) is refused by ``audit verify``."""
    app = make_app(signed_log.bridge("api"), signed_log.as_part("api"))
    app.save(Project(project_id=uuid4().hex, name="p", domain_id="default", description="", enabled=True))
    old = signed_log.registry.current("api")

    registry = trust.rotate(
        signed_log.settings, signed_log.directory, "api", lambda: app.recorder.max_notification_id() or 0
    )
    app.save(Project(project_id=uuid4().hex, name="q", domain_id="default", description="", enabled=True))

    new = registry.current("api")
    assert old is not None and new is not None and new.public_key != old.public_key
    assert registry.by_key(old.public_key) == dataclasses.replace(old, retired=True, retired_at=2)
    assert old.public_key not in (signed_log.directory / trust.NATS_CONF).read_text()
    verifier = Verifier(registry)
    s = signed_log.settings
    report = signatures.verify(
        s.nats_urls,
        s.stream,
        s.subject_prefix,
        verifier,
        seed_file=signed_log.as_part("auditor").nats_seed_file,
    )
    assert (report.signed, report.refused) == (1, 1)
    assert report.first_refused is not None and report.first_refused.position == 2
    assert "signed by a key of api retired at position 2" in report.first_refused.reason


def test_stratus_audit_verify_and_stratus_trust_on_the_command_line(signed_log: Trusted) -> None:
    """The commands an operator runs: ``stratus trust show`` lists the identities; ``stratus audit
    verify`` with the registry counts the signed events and exits 1 naming a refused one."""
    app = make_app(signed_log.bridge("api"), signed_log.as_part("api"))
    project = Project(project_id=uuid4().hex, name="p", domain_id="default", description="", enabled=True)
    app.save(project)
    unsigned = JetStreamApplicationRecorder.from_settings(signed_log.bridge("admin"), signed_log.settings)
    unsigned.insert_events([_grant(app, project, "member-user", "admin")])
    env = {
        **os.environ,
        **signed_log.as_part("auditor").to_env(),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }

    def stratus(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "processes.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    shown = stratus("trust", "show", "--dir", str(signed_log.directory))
    verified = stratus("audit", "verify")

    assert shown.returncode == 0 and "host:compute-1" in shown.stdout and "signed from: 1" in shown.stdout
    assert verified.returncode == 1, verified.stderr
    lines = verified.stdout.splitlines()
    assert lines[0].startswith("OK: 2 events") and lines[-1].startswith("anchor: 2:")
    assert "signatures: 1 signed (api 1), 0 unsigned" in verified.stdout
    assert "REFUSED: 1 event(s); the first at position 2" in verified.stdout


def test_stratus_audit_verify_reports_an_admins_exclusion_and_fails_on_a_void_one(
    signed_log: Trusted,
) -> None:
    """Run as an operator and an auditor run them: ``stratus audit verify`` fails on a forged grant;
    once ``stratus trust exclude`` excludes it, verify passes and lists the exclusion (the event
    stays in the chain). Exclusions that exclude nothing fail it: one signed by a host's key, one by
    the API's (it may append anything, but it is no admin), and an admin's of an event not refused."""
    api = make_app(signed_log.bridge("api"), signed_log.as_part("api"))
    operator = signed_log.bridge("admin")
    host_key = Signer.from_seed_file(trust.seed_file(signed_log.directory, "host:compute-1"))
    by_host = JetStreamApplicationRecorder.from_settings(operator, signed_log.settings, signer=host_key)
    project = Project(project_id=uuid4().hex, name="p", domain_id="default", description="", enabled=True)
    api.save(project)  # 1
    by_host.insert_events([_grant(api, project, "member-user", r) for r in ("admin", "manager", "reader")])

    def stratus(identity: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            **signed_log.as_part(identity).to_env(),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        return subprocess.run(
            [sys.executable, "-m", "processes.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    forged = stratus("auditor", "audit", "verify")
    assert forged.returncode == 1, forged.stderr
    assert "REFUSED: 3 event(s); the first at position 2" in forged.stdout
    assert "EXCLUDED" not in forged.stdout

    excluded = stratus("admin", "trust", "exclude", "2", "--reason", "compute-1's stolen key")
    assert excluded.returncode == 0, excluded.stderr
    for later in (3, 4):
        assert stratus("admin", "trust", "exclude", str(later), "--reason", "the same key").returncode == 0
    passed = stratus("auditor", "audit", "verify")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    lines = passed.stdout.splitlines()
    assert lines[0].startswith("OK: 8 events") and lines[-1].startswith("anchor: 8:")  # the chain: all 8
    assert "REFUSED" not in passed.stdout
    grant = decode_message(api.recorder.read_messages(2, 1)[0])[1].id  # type: ignore[attr-defined]
    assert (
        f"EXCLUDED: position 2 (event {grant}), refused: host:compute-1 (host) may not append project"
        in passed.stdout
    )
    assert "; excluded at position 6 by admin: compute-1's stolen key\n" in passed.stdout
    as_json = json.loads(stratus("auditor", "audit", "verify", "--json").stdout)["signatures"]
    assert (as_json["ok"], as_json["refused"], as_json["void_exclusions"]) == (True, 0, [])
    assert [(e["position"], e["excluded_at"], e["excluded_by"]) for e in as_json["excluded"]] == [
        (2, 6, "admin"), (3, 7, "admin"), (4, 8, "admin"),
    ]  # fmt: skip

    def void(by: Stratus, position: int, recorder: JetStreamApplicationRecorder | None = None) -> None:
        exclusions: Exclusions = by.repository.get(Exclusions.create_id())
        exclusions.exclude(position, "an event id", str(project.id), "forged")
        if recorder is None:
            by.save(exclusions)
        else:
            recorder.insert_events([by.mapper.to_stored_event(e) for e in exclusions.collect_events()])

    void(api, 5, by_host)  # 9: a host's key on the exclusions, refused as well
    void(api, 9)  # 10: the API's, of the host's refused exclusion
    void(make_app(operator, signed_log.as_part("admin")), 1)  # 11: the admin's, of the project's creation
    failed = stratus("auditor", "audit", "verify")
    assert failed.returncode == 1, failed.stderr
    assert "REFUSED: 1 event(s); the first at position 9" in failed.stdout
    assert "VOID EXCLUSION at position 9 " in failed.stdout and "itself refused" in failed.stdout
    assert (
        "VOID EXCLUSION at position 10 " in failed.stdout
        and "signed by api (api), not by an admin identity: it excludes nothing" in failed.stdout
    )
    assert (
        "VOID EXCLUSION at position 11 " in failed.stdout
        and "position 1 holds no refused event" in failed.stdout
    )
    assert failed.stdout.count("EXCLUDED: ") == 3  # the admin's exclusions before still hold


def test_a_hypervisor_worker_refuses_a_server_whose_history_holds_another_hosts_event(
    signed_log: Trusted, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    """The scheduler places a server on compute-1, then compute-2's key appends ``Deleted`` to it
    (NATS cannot tell: the subject names the server, not the host). compute-1's worker, loading that
    server to act on its ``Scheduled``, finds the forged event in its history: the delivery is
    quarantined (not acted on, no fault recorded), while a server with a clean history boots."""
    operator = signed_log.bridge("admin")
    part = signing_parts(signed_log, operator)
    api, scheduler, other = part("api"), part("scheduler"), part("host:compute-2")
    api.create_flavor(M1_SMALL)
    api.register_host(RegisterHost("compute-1", 4, 8192, 100))
    victim, genuine = (
        api.create_server(CreateServer(n, "p1", "u1", "small")).id for n in ("victim", "genuine")
    )
    scheduler.place_instance(PlaceInstance(victim, "compute-1"))
    scheduler.place_instance(PlaceInstance(genuine, "compute-1"))
    forged: Instance = other.app.repository.get(UUID(victim))
    forged.mark_deleted()
    forged_at = other.app.save(forged)[-1].notification.id
    placed = api.instance(victim, deleted_too=True).version

    host_settings = dataclasses.replace(signed_log.as_part("host:compute-1"), host_name="compute-1")
    host_bridge = signed_log.bridge("host:compute-1")
    host_app = Stratus(
        Factory(bridge=host_bridge, settings=host_settings, verify_loads=True)
    )  # as processes/hypervisor.py
    worker = Worker(
        lambda stop: hypervisor.run(
            host_settings, bridge=host_bridge, app=host_app,
            driver=LibvirtDriver(lambda: conn, instances_path=tmp_path), stop=stop,
            instances_path=tmp_path / "instances", retry=FAST_RETRY, poll=0.1,
        )
    )  # fmt: skip
    try:
        assert eventually(lambda: settled(api, genuine)).vm_state == "active"
        quarantine = Quarantine(operator, log_stream=signed_log.settings.stream)
        records = eventually(lambda: quarantine.list(hypervisor.durable_name("compute-1")) or None)
    finally:
        worker.close()

    assert [(r.originator_id, r.error) for r in records] == [(victim, "UntrustedEvent")]
    assert f"history of {victim} holds an event refused at position {forged_at}" in records[0].reason
    assert "host:compute-2 (host) may not append deleted" in records[0].reason
    assert api.instance(victim, deleted_too=True).version == placed  # no step, no fault
    assert {d.UUIDString() for d in conn.listAllDomains()} == {genuine}


def test_the_scheduler_refuses_a_request_whose_history_holds_a_hosts_event(signed_log: Trusted) -> None:
    """compute-2's key appends ``Deleted`` to a server no scheduler has placed yet (no host may
    append its events). The scheduler, running as itself with the registry, loads the server to place
    it, finds the forged event and quarantines the request instead of acting on it (nor faulting
    the server); the other request of the same batch is placed."""
    operator = signed_log.bridge("admin")
    api = Handlers(make_app(operator, signed_log.as_part("api")))
    api.create_flavor(M1_SMALL)
    api.register_host(RegisterHost("compute-1", 4, 8192, 100))
    victim, genuine = (
        api.create_server(CreateServer(n, "p1", "u1", "small")).id for n in ("victim", "genuine")
    )
    other = Handlers(make_app(operator, signed_log.as_part("host:compute-2")))
    forged: Instance = other.app.repository.get(UUID(victim))
    forged.mark_deleted()
    forged_at = other.app.save(forged)[-1].notification.id
    requested = api.instance(victim, deleted_too=True).version

    settings = signed_log.as_part("scheduler")
    bridge = signed_log.bridge("scheduler")
    app = Stratus(Factory(bridge=bridge, settings=settings, verify_loads=True))  # as processes/scheduler.py
    worker = Worker(lambda stop: scheduler_worker.run(settings, bridge=bridge, app=app, stop=stop, poll=0.1))
    try:
        assert eventually(lambda: api.instance(genuine).host) == "compute-1"
        quarantine = Quarantine(operator, log_stream=signed_log.settings.stream)
        records = eventually(lambda: quarantine.list(scheduler_worker.DURABLE) or None)
    finally:
        worker.close()

    assert [(r.originator_id, r.error) for r in records] == [(victim, "UntrustedEvent")]
    assert f"history of {victim} holds an event refused at position {forged_at}" in records[0].reason
    assert "host:compute-2 (host) may not append deleted" in records[0].reason
    assert "it is on no host" in records[0].reason
    assert api.instance(victim, deleted_too=True).version == requested  # not placed, no fault


def test_a_hosts_usage_event_for_another_hosts_server_is_refused(
    signed_log: Trusted, database_url: str
) -> None:
    """compute-2's key releases the quota of a server on compute-1 (``ProjectUsage.ResourcesReleased``:
    its subject names the project, not the server): the projector and a rebuild quarantine it, and
    ``audit verify`` refuses it; compute-1's own release of it is trusted."""
    operator = signed_log.bridge("admin")
    api, scheduler, compute = two_hosts(signed_log, operator)
    image = public_image(api.app)
    a = api.create_server(CreateServer("a", "p1", "u1", "small", image_ref=image)).id
    scheduler.place_instance(PlaceInstance(a, "compute-1"))

    def release(host: str) -> int:
        usage = compute[host].usage("p1")
        usage._resources_released(a)
        return compute[host].app.save(usage)[-1].notification.id

    forged, own = release("compute-2"), release("compute-1")

    quarantine = Quarantine(operator, log_stream=signed_log.settings.stream)
    verifier = Verifier.load(signed_log.settings.trust_registry)
    log = api.app.recorder
    with read_models(database_url) as conn:
        projector = Projector(log, api.app.mapper, conn, quarantine=quarantine, trust=verifier)  # type: ignore[arg-type]
        assert projector.catch_up() == own
        rebuild(conn, log, api.app.mapper, quarantine=quarantine, trust=verifier)  # type: ignore[arg-type]
    for part_name in ("projector", "rebuild"):
        records = quarantine.list(part_name)
        assert [(r.position, r.error) for r in records] == [(forged, "UntrustedEvent")]
        assert (
            f"host:compute-2 (host) may not append projectusage resourcesreleased for server {a}: "
            "it is on compute-1" in records[0].reason
        )
    assert verifier is not None
    s = signed_log.settings
    auditor = trust.seed_file(signed_log.directory, "auditor")
    report = signatures.verify(s.nats_urls, s.stream, s.subject_prefix, verifier, seed_file=auditor)
    assert (
        report.refused == 1 and report.first_refused is not None and report.first_refused.position == forged
    )


def test_a_snapshot_planted_by_a_host_is_refused_and_the_load_replays(signed_log: Trusted) -> None:
    """Hosts may write snapshots (NATS lets them: they snapshot their own hosts), so compute-2's key
    plants one of a server on compute-1 saying it is deleted. A load (any part with the registry)
    refuses it and replays the server's events; the same snapshot signed by the API is used (which
    shows the load did look at it), and a host's part does not overwrite it."""
    operator = signed_log.bridge("admin")
    api = Handlers(make_app(operator, signed_log.as_part("api")))
    api.create_flavor(M1_SMALL)
    api.register_host(RegisterHost("compute-1", 4, 8192, 100))
    a = api.create_server(CreateServer("a", "p1", "u1", "small")).id
    Handlers(make_app(operator, signed_log.as_part("scheduler"))).place_instance(
        PlaceInstance(a, "compute-1")
    )
    server: Instance = api.app.repository.get(UUID(a))
    assert isinstance(api.app.recorder, AnchoredRecorder)
    anchor = api.app.recorder.anchor(UUID(a), server.version)
    assert anchor is not None and server.vm_state == "building"
    server.vm_state = "deleted"
    planted = api.app.mapper.to_stored_event(Snapshot.take(server, anchor))

    def plant(identity: str) -> None:
        key = Signer.from_seed_file(trust.seed_file(signed_log.directory, identity))
        JetStreamSnapshotRecorder(operator, stream=signed_log.settings.stream, signer=key).insert_events(
            [planted]
        )

    def load() -> tuple[str, Stratus]:
        app = make_app(operator, signed_log.as_part("api"))
        return app.repository.get(UUID(a)).vm_state, app

    plant("host:compute-2")
    by_host, app = load()
    assert by_host == "building"
    assert app.repository.snapshot_stats["none"] == 1  # refused: as if there were none
    plant("api")
    by_api, app = load()
    assert by_api == "deleted" and app.repository.snapshot_stats["used"] == 1
    # A host's part, knowing the registry, does not write what no one would use (it would replace
    # the aggregate's one snapshot, the API's here).
    host_snapshots = JetStreamSnapshotRecorder(
        operator, stream=signed_log.settings.stream, trust=Verifier.load(signed_log.settings.trust_registry),
        signer=Signer.from_seed_file(trust.seed_file(signed_log.directory, "host:compute-1")),
    )  # fmt: skip
    host_snapshots.insert_events([planted])
    assert host_snapshots.stats["not_written"] == 1
    assert load()[1].repository.snapshot_stats["used"] == 1


def test_a_servers_moves_and_deletion_appended_by_their_own_parts_are_all_trusted(
    signed_log: Trusted, database_url: str
) -> None:
    """The check of a host's per-server events refuses none of what the hosts append for their own
    servers: a resize from compute-1 to compute-2 reverted, one that fails on compute-2 (the claims
    returned to compute-1 in the same append), a migration confirmed, then the deletion on compute-2,
    with an address and a server group to release. ``audit verify`` and the projector refuse nothing."""
    operator = signed_log.bridge("admin")
    net = FixedNetwork("private", "10.7.0.0/24")

    def part(name: str) -> Handlers:
        return Handlers(make_app(operator, signed_log.as_part(name)), network=net)

    api, scheduler = part("api"), part("scheduler")
    c1, c2 = (part(f"host:{h}") for h in HOSTS)
    api.create_flavor(M1_SMALL)
    api.create_flavor(M1_THREE)
    for h in HOSTS:
        api.register_host(RegisterHost(h, 8, 8192, 100))
    group = api.bus.handle(CreateServerGroup("g", "p1", "u1", "anti-affinity")).id
    a = api.create_server(CreateServer("a", "p1", "u1", "small", group=group)).id
    scheduler.place_instance(PlaceInstance(a, "compute-1"))
    c1.start_spawning(StartSpawning(a, "compute-1"))
    c1.finish_spawning(FinishSpawning(a, 1))

    def move(flavor: str | None) -> None:
        request = ResizeServer(a, "p1", flavor) if flavor else MigrateServer(a)
        api.bus.handle(request)
        scheduler.bus.handle(ScheduleMigration(a, "compute-2"))
        c1.bus.handle(LeftSource(a))

    move("3")
    c2.bus.handle(FinishMigration(a, 1))
    api.bus.handle(RevertResize(a, "p1"))
    c2.bus.handle(LeftDest(a))
    c1.bus.handle(FinishRevert(a, 1))
    move("3")
    c2.bus.handle(FailMigration(a, "MigrationError", "the destination could not start the guest"))
    move(None)
    c2.bus.handle(FinishMigration(a, 1))
    api.bus.handle(ConfirmResize(a, None, admin=True))
    api.delete_server(DeleteServer(a, "p1"))
    c2.bus.handle(FinishDeletion(a))

    verifier = Verifier.load(signed_log.settings.trust_registry)
    assert verifier is not None
    s = signed_log.settings
    auditor = trust.seed_file(signed_log.directory, "auditor")
    report = signatures.verify(s.nats_urls, s.stream, s.subject_prefix, verifier, seed_file=auditor)
    assert report.refused == 0, report.first_refused
    assert report.by_identity["host:compute-1"] > 0 and report.by_identity["host:compute-2"] > 0
    worker = _worker_app(signed_log, "host:compute-2")  # each aggregate loads as a worker loads it
    stored = worker.recorder.read_messages(1, 10_000)  # type: ignore[attr-defined]
    for aggregate in dict.fromkeys(decode_message(m)[1].originator_id for m in stored):
        worker.repository.get(UUID(str(aggregate)))  # no event refused: the usage, network and group included
    quarantine = Quarantine(operator, log_stream=s.stream)
    with read_models(database_url) as conn:
        projector = Projector(api.app.recorder, api.app.mapper, conn, quarantine=quarantine, trust=verifier)  # type: ignore[arg-type]
        projector.catch_up()
        row = queries.get_server(conn, a, None)
        assert row is not None and row["deleted"]
    assert quarantine.list("projector") == []


def test_compute_1s_reconciliation_skips_a_server_with_a_forged_history_and_goes_on(
    signed_log: Trusted, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    """Two servers active on compute-1 whose guests are gone; compute-2's key forged an event in the
    one compute-1 reconciles first. Its reconciliation, loading as a worker does, leaves that server
    alone (logged) and still records the other's vanished guest: one forged event does not stop a
    host's reconciliation."""
    operator = signed_log.bridge("admin")
    part = signing_parts(signed_log, operator)
    api, scheduler, c1 = part("api"), part("scheduler"), part("host:compute-1")
    api.create_flavor(M1_SMALL)
    api.register_host(RegisterHost("compute-1", 4, 8192, 100))
    servers = sorted(api.create_server(CreateServer(n, "p1", "u1", "small")).id for n in "ab")
    for s in servers:
        scheduler.place_instance(PlaceInstance(s, "compute-1"))
        c1.start_spawning(StartSpawning(s, "compute-1"))
        c1.finish_spawning(FinishSpawning(s, 1))
    forged, other = servers
    server: Instance = part("host:compute-2").app.repository.get(UUID(forged))
    server.mark_deleted()
    part("host:compute-2").app.save(server)
    before = api.instance(forged, deleted_too=True).version

    host_settings = signed_log.as_part("host:compute-1")
    host_app = Stratus(
        Factory(bridge=signed_log.bridge("host:compute-1"), settings=host_settings, verify_loads=True)
    )
    driver = LibvirtDriver(lambda: conn, instances_path=tmp_path)
    with acting(CommandContext(actor=hypervisor.HYPERVISOR)):
        assert Reconciler(Handlers(host_app).bus, driver, "compute-1").once() == 1

    assert api.instance(other).vm_state == "error"  # its guest vanished: recorded
    assert api.instance(forged, deleted_too=True).version == before  # left alone


def _worker_app(signed_log: Trusted, identity: str) -> Stratus:
    """An app that loads as a worker does (``verify_loads``, as processes/scheduler.py)."""
    return Stratus(
        Factory(bridge=signed_log.bridge(identity), settings=signed_log.as_part(identity), verify_loads=True)
    )


def test_the_schedulers_host_feed_leaves_forged_host_events_out_of_its_view(signed_log: Trusted) -> None:
    """compute-2's key releases the claim of a server on compute-1 (a move's return on another host:
    NATS and the subject rules let a host append it, only where the server is tells), and an event
    signed by no one disables compute-2. The scheduler's host feed quarantines both and its view
    keeps compute-1's claim and compute-2 enabled; a worker's load of compute-1's Host refuses it too."""
    operator = signed_log.bridge("admin")

    def part(name: str | None) -> Handlers:
        return Handlers(make_app(operator, signed_log.as_part(name) if name else signed_log.settings))

    api, scheduler = part("api"), part("scheduler")
    api.create_flavor(M1_SMALL)
    for h in HOSTS:
        api.register_host(RegisterHost(h, 4, 8192, 100))
    a = api.create_server(CreateServer("a", "p1", "u1", "small")).id
    scheduler.place_instance(PlaceInstance(a, "compute-1"))
    forger = part("host:compute-2")
    host = forger.host("compute-1")
    host._released(a)
    released = forger.app.save(host)[-1].notification.id
    nobody = part(None)
    other = nobody.host("compute-2")
    other._service_disabled("forged")
    disabled = nobody.app.save(other)[-1].notification.id

    bridge = signed_log.bridge("scheduler")  # the feed and the app share it, as in the scheduler
    app = Stratus(Factory(bridge=bridge, settings=signed_log.as_part("scheduler"), verify_loads=True))
    view = HostView(scheduler_worker.host_reader(app))  # as the scheduler's
    hosts = SubjectLayout(signed_log.settings.subject_prefix).kind_filter("host")
    verifier = Verifier.load(signed_log.settings.trust_registry)
    feed = HostFeed(
        bridge, app, view, stream=signed_log.settings.stream, subject_filter=hosts, trust=verifier
    ).open()
    try:
        feed.catch_up()
        compute_1, compute_2 = view.named("compute-1"), view.named("compute-2")
        assert compute_1 is not None and a in compute_1.claims
        assert compute_2 is not None and compute_2.schedulable
        records = Quarantine(operator, log_stream=signed_log.settings.stream).list("host-feed")
        assert [(r.position, r.error) for r in records] == [
            (released, "UntrustedEvent"), (disabled, "UntrustedEvent"),
        ]  # fmt: skip
        assert (
            f"host:compute-2 (host) may not append host instancereleased for server {a}: it is on compute-1"
            in records[0].reason
        )
        assert "unsigned" in records[1].reason
        with pytest.raises(UntrustedEvent, match=f"refused at position {released}"):
            app.repository.get(host.id)

        # compute-1's next event finds the view a version behind; the host cannot be read again
        # while its history holds the forged event: it leaves the view (nothing is placed on it)
        own = part("host:compute-1")

        def set_forced_down(down: bool) -> None:
            h = own.host("compute-1")
            h._forced_down_set(down)
            own.app.save(h)

        set_forced_down(False)
        feed.catch_up()
        assert view.named("compute-1") is None
        trust.exclude(signed_log.as_part("admin"), released, "appended with compute-2's stolen key")
        set_forced_down(False)
        feed.catch_up()
        back = view.named("compute-1")
        assert back is not None and a in back.claims  # the forged release counts for nothing
    finally:
        feed.close()


def test_a_workers_load_of_a_usage_holds_a_hosts_release_to_where_its_server_is(
    signed_log: Trusted,
) -> None:
    """compute-2's key releases the quota of a server on compute-1 in project p1, compute-1's key
    that of its own server in project p2. A worker's load of p1's usage refuses it (check 6, from the
    server's own history); p2's loads, and p1's before the forged release."""
    operator = signed_log.bridge("admin")
    api, scheduler, compute = two_hosts(signed_log, operator)
    a, b = (api.create_server(CreateServer(n, p, "u1", "small")).id for n, p in (("a", "p1"), ("b", "p2")))
    scheduler.place_instance(PlaceInstance(a, "compute-1"))
    scheduler.place_instance(PlaceInstance(b, "compute-1"))
    usage_id = compute["compute-1"].usage("p1").id
    assert _worker_app(signed_log, "scheduler").repository.get(usage_id).version > 0

    def release(host: str, project: str, server: str) -> int:
        usage = compute[host].usage(project)
        usage._resources_released(server)
        return compute[host].app.save(usage)[-1].notification.id

    forged = release("compute-2", "p1", a)
    release("compute-1", "p2", b)

    app = _worker_app(signed_log, "host:compute-1")
    log = app.recorder
    assert isinstance(log, JetStreamApplicationRecorder)
    # what a refusal is confirmed on: the server's history as the stream's leader answers it
    from_leader = [(v, p) for v, p, _h, _b in log.leaders_server_history(a)]
    assert len(from_leader) >= 2 and from_leader == [(v, p) for v, p, _h, _b in log.server_history(a)]
    with pytest.raises(UntrustedEvent) as refused:
        app.repository.get(usage_id)
    assert f"refused at position {forged}" in str(refused.value)
    assert (
        f"host:compute-2 (host) may not append projectusage resourcesreleased for server {a}: "
        "it is on compute-1" in str(refused.value)
    )
    assert app.repository.get(compute["compute-1"].usage("p2").id).version > 0


def test_the_operator_excludes_a_forged_event_and_the_servers_deletion_proceeds(
    signed_log: Trusted, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    """compute-2's key appends ``Deleted`` to a server placed on compute-1: compute-1's worker
    quarantines its placement and acts on nothing (frozen), and the API's load refuses a deletion.
    ``stratus trust exclude`` records, as the operator, that the forged event counts as nothing: the
    deletion is then accepted and compute-1's worker carries it out. Only a refused event, the first
    of its history, can be excluded."""
    operator = signed_log.bridge("admin")
    part = signing_parts(signed_log, operator)

    def checked() -> Handlers:  # loads as the API and the workers load (api.app.build)
        return Handlers(
            Stratus(Factory(bridge=operator, settings=signed_log.as_part("api"), verify_loads=True))
        )

    api, scheduler = part("api"), part("scheduler")
    api.create_flavor(M1_SMALL)
    api.register_host(RegisterHost("compute-1", 4, 8192, 100))
    victim = api.create_server(CreateServer("victim", "p1", "u1", "small")).id
    scheduler.place_instance(PlaceInstance(victim, "compute-1"))
    other = part("host:compute-2")
    forged: Instance = other.app.repository.get(UUID(victim))
    forged.mark_deleted()
    forged_at = other.app.save(forged)[-1].notification.id
    admin = signed_log.as_part("admin")
    with pytest.raises(SystemExit, match="first event"):
        trust.exclude(admin, 1, "")  # the flavor's creation: not refused, and its aggregate's first

    host_settings = dataclasses.replace(signed_log.as_part("host:compute-1"), host_name="compute-1")
    host_bridge = signed_log.bridge("host:compute-1")
    host_app = Stratus(Factory(bridge=host_bridge, settings=host_settings, verify_loads=True))
    worker = Worker(
        lambda stop: hypervisor.run(
            host_settings, bridge=host_bridge, app=host_app,
            driver=LibvirtDriver(lambda: conn, instances_path=tmp_path), stop=stop,
            instances_path=tmp_path / "instances", retry=FAST_RETRY, poll=0.1,
        )
    )  # fmt: skip
    try:
        quarantine = Quarantine(operator, log_stream=signed_log.settings.stream)
        (frozen,) = eventually(lambda: quarantine.list(hypervisor.durable_name("compute-1")) or None)
        assert frozen.originator_id == victim and frozen.error == "UntrustedEvent"
        with pytest.raises(UntrustedEvent, match=f"refused at position {forged_at}"):
            checked().delete_server(DeleteServer(victim, "p1"))

        env = {**os.environ, **admin.to_env(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        said = subprocess.run(
            [sys.executable, "-m", "processes.cli", "trust", "exclude", str(forged_at),
             "--reason", "appended with compute-2's stolen key"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert said.returncode == 0, said.stderr
        assert said.stdout == f"excluded: stratus.instance.deleted of {victim} at position {forged_at}\n"
        with pytest.raises(SystemExit, match="is not refused"):
            trust.exclude(admin, forged_at, "twice")
        server = checked().instance(victim)
        assert (server.vm_state, server.host) == ("building", "compute-1")  # the forged event: nothing
        checked().delete_server(DeleteServer(victim, "p1"))
        assert eventually(lambda: checked().instance(victim, deleted_too=True).vm_state == "deleted" or None)
    finally:
        worker.close()
    last = api.app.recorder.read_messages(forged_at + 1, 100)  # type: ignore[attr-defined]
    deleted = [m for m in last if decode_message(m)[1].type.endswith(".deleted")]
    assert deleted and deleted[-1].headers[SIGNER] == signed_log.registry.current("host:compute-1").public_key  # type: ignore[union-attr]


def test_a_placement_quarantined_before_the_exclusion_is_spawned_when_its_hosts_worker_restarts(
    signed_log: Trusted, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    """What docs/trust.md tells the operator after an exclusion: compute-1's worker quarantined the
    placement of a server whose history holds compute-2's forged ``Deleted``; the exclusion does not
    hand that delivery to it again (the server stays building, no guest), but a restart of the
    worker runs at start the step left under way (``workers.recovery``): the guest is spawned."""
    operator = signed_log.bridge("admin")
    api, scheduler = (Handlers(make_app(operator, signed_log.as_part(p))) for p in ("api", "scheduler"))
    api.create_flavor(M1_SMALL)
    api.register_host(RegisterHost("compute-1", 4, 8192, 100))
    victim = api.create_server(CreateServer("victim", "p1", "u1", "small")).id
    scheduler.place_instance(PlaceInstance(victim, "compute-1"))
    other = Handlers(make_app(operator, signed_log.as_part("host:compute-2")))
    forged: Instance = other.app.repository.get(UUID(victim))
    forged.mark_deleted()
    forged_at = other.app.save(forged)[-1].notification.id
    host_settings = dataclasses.replace(signed_log.as_part("host:compute-1"), host_name="compute-1")
    host_bridge = signed_log.bridge("host:compute-1")

    def start() -> Worker:
        app = Stratus(Factory(bridge=host_bridge, settings=host_settings, verify_loads=True))
        return Worker(
            lambda stop: hypervisor.run(
                host_settings, bridge=host_bridge, app=app,
                driver=LibvirtDriver(lambda: conn, instances_path=tmp_path), stop=stop,
                instances_path=tmp_path / "instances", retry=FAST_RETRY, poll=0.1,
            )
        )  # fmt: skip

    worker = start()
    try:
        quarantine = Quarantine(operator, log_stream=signed_log.settings.stream)
        (frozen,) = eventually(lambda: quarantine.list(hypervisor.durable_name("compute-1")) or None)
        assert frozen.topic.endswith("Scheduled") and frozen.originator_id == victim
        trust.exclude(signed_log.as_part("admin"), forged_at, "appended with compute-2's stolen key")
        checked = Handlers(
            Stratus(Factory(bridge=operator, settings=signed_log.as_part("api"), verify_loads=True))
        )
        server = checked.instance(victim)
        assert (server.vm_state, server.task_state, server.host) == ("building", None, "compute-1")
    finally:
        worker.close()
    assert victim not in {d.UUIDString() for d in conn.listAllDomains()}  # the exclusion re-drove nothing

    worker = start()  # the operator restarts compute-1's worker
    try:
        assert eventually(lambda: settled(checked, victim)).vm_state == "active"
    finally:
        worker.close()
    assert victim in {d.UUIDString() for d in conn.listAllDomains()}
