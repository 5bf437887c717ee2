"""The raw protocol reader over TLS, as deploy/nats-cluster/ closes the log: a rebuild and the live
projector's catch-up read below nats-py there too, verifying the server against the CA the bridge
trusts (``SSL_CERT_FILE``) and signing the nonce with the part's NKey; a CA it does not trust, or a
``tls://`` server offering no TLS, is refused before anything is sent (the replay then reads through
nats-py, which fails the same way)."""

from __future__ import annotations

import dataclasses
import json
import logging
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest

from commands.app import Stratus
from processes.rebuild import main
from projections import queries
from projections.rawlog import RawLog, replay_log
from projections.rebuild import OLD_SCHEMA, rebuild
from projections.runner import open_event_log
from projections.schema import LIVE_SCHEMA
from stratus.audit.rawreader import RawReader, RawReaderError
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from stratus.eventstore.signing import Verifier
from stratus.natsserver import NatsServer
from tests.fixtures.commands import make_app
from tests.fixtures.nats import raw_reads
from tests.fixtures.projections import head, populate, projector_thread, snapshot
from tests.fixtures.tls import write_test_pki
from tests.fixtures.trust import Trusted


def _written(trusted_tls: Trusted, instances: int) -> Stratus:
    """A log of ``instances`` servers (and their hosts) written as the admin, over TLS."""
    app = make_app(trusted_tls.bridge("admin"), trusted_tls.as_part("admin"))
    app.recorder.ensure_stream()  # type: ignore[attr-defined]
    populate(app, instances=instances, hosts=3, chunk=50)
    return app


def _projector(trusted_tls: Trusted, database_url: str) -> Settings:
    return dataclasses.replace(trusted_tls.as_part("projector"), database_url=database_url)


def test_a_rebuild_over_tls_reads_below_nats_py_and_rebuilds_the_tables_nats_py_does(
    trusted_tls: Trusted, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = _written(trusted_tls, 150)
    settings = _projector(trusted_tls, database_url)
    with open_event_log(settings) as (log, mapper, quarantine):
        with replay_log(log) as source:
            assert isinstance(source, RawLog)
        with psycopg.connect(database_url, autocommit=True) as conn:
            trust = Verifier.load(settings.trust_registry)
            rebuild(conn, log, mapper, raw_read=False, trust=trust, quarantine=quarantine)
            through_nats_py = snapshot(conn)
    before = raw_reads(trusted_tls.server)
    with caplog.at_level(logging.INFO, "stratus.rebuild"):
        assert main(settings, keep_old=True) == 0  # `stratus rebuild --keep-old`, as the projector
    assert "through nats-py" not in caplog.text and "raw reader failed" not in caplog.text
    read = [c for cid, c in raw_reads(trusted_tls.server).items() if cid not in before]
    assert read and all(c["tls_version"] == "1.3" for c in read)
    assert sum(c["out_msgs"] for c in read) >= head(app)  # the whole log, and the end-of-batch replies
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert snapshot(conn, OLD_SCHEMA) == through_nats_py == snapshot(conn, LIVE_SCHEMA)
    assert len(through_nats_py["instances"]) == 150


def test_the_runner_over_tls_catches_up_below_nats_py(
    trusted_tls: Trusted, database_url: str, rm: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    app = _written(trusted_tls, 150)
    settings = _projector(trusted_tls, database_url)
    with caplog.at_level(logging.INFO), projector_thread(settings):
        assert queries.wait_for_position(rm, head(app), timeout=30)
    assert "projector catching up from position 0" in caplog.text
    assert "through nats-py" not in caplog.text and "raw reader failed" not in caplog.text
    (read,) = raw_reads(trusted_tls.server).values()
    assert read["tls_version"] == "1.3" and read["out_msgs"] >= head(app)
    live = snapshot(rm)
    rebuild(rm, app.recorder, app.mapper, raw_read=False, trust=Verifier.load(settings.trust_registry))  # type: ignore[arg-type]
    assert snapshot(rm) == live


def test_a_raw_read_over_tls_refuses_a_server_its_ca_does_not_vouch_for(
    trusted_tls: Trusted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings = trusted_tls.as_part("projector")
    with open_event_log(settings) as (log, _, _):  # connected while the deployment's CA was trusted
        monkeypatch.setenv("SSL_CERT_FILE", str(write_test_pki(tmp_path / "other") / "ca.pem"))
        with pytest.raises(RawReaderError, match="CERTIFICATE_VERIFY_FAILED"):
            RawReader(settings.nats_urls, settings.stream, seed_file=settings.nats_seed_file)
        with caplog.at_level(logging.WARNING, "stratus.rebuild"), replay_log(log) as source:
            assert source is log
    assert "rebuild: reading the log through nats-py: the raw reader cannot connect" in caplog.text
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text
    assert raw_reads(trusted_tls.server) == {}  # never sent its CONNECT (its credentials)


def test_a_nats_url_to_a_server_that_requires_tls_is_read_over_tls(trusted_tls: Trusted) -> None:
    """As nats-py does: the server's INFO asks for TLS, the reader upgrades (and verifies)."""
    settings = trusted_tls.as_part("auditor")
    assert trusted_tls.server.url.startswith("nats://")
    with RawReader((trusted_tls.server.url,), settings.stream, seed_file=settings.nats_seed_file) as reader:
        assert reader.last_position(f"{settings.subject_prefix}.>") == 0
        (read,) = raw_reads(trusted_tls.server).values()
    assert read["tls_version"] == "1.3"


def test_a_tls_url_to_a_server_that_offers_no_tls_is_refused(nats_server: NatsServer) -> None:
    url = nats_server.url.replace("nats://", "tls://", 1)
    with pytest.raises(RawReaderError, match=r"asks for TLS \(tls://\) and the server offers none"):
        RawReader((url,), "ANY")


def test_the_bridge_refuses_a_tls_url_whose_server_offers_no_tls(nats_server: NatsServer) -> None:
    """nats-py alone would send CONNECT in plain text to a ``tls://`` URL whose server does not ask
    for TLS (a downgrade by whatever answers); the bridge never connects there."""
    url = nats_server.url.replace("nats://", "tls://", 1)
    bridge = NatsBridge((url,), name="downgrade-test")
    try:
        with pytest.raises(TimeoutError):  # it keeps trying, never connected
            bridge.start(wait=1.5)
    finally:
        bridge.close()
    with urllib.request.urlopen(f"{nats_server.monitor_url}/connz?state=all", timeout=5) as r:
        names = [c.get("name") for c in json.load(r).get("connections") or []]
    assert "downgrade-test" not in names  # no CONNECT was ever sent
    with NatsBridge((nats_server.url,), name="plain-test").start() as plain:  # nats:// stays plain
        assert plain.is_connected
