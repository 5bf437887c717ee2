"""The telemetry's pieces alone: JSON log lines and their ids, readiness bodies, the projector's lag,
the probes' HTTP answers and the settings that choose them (docs/operations.md)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from api.app import LazyApp
from api.metadata.app import MetadataApp
from processes.logs import ContextIds, JsonFormatter, handler
from stratus import metrics
from stratus.config import Settings
from stratus.context import CommandContext, acting
from stratus.health import Check, LogLag, Probes, lag, lag_check, readiness_body


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    h = handler("json")
    assert isinstance(h, logging.StreamHandler)
    h.setStream(out)
    logger = logging.getLogger("test.telemetry")
    logger.addHandler(h)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, out
    logger.removeHandler(h)


def test_a_json_line_carries_the_ids_of_the_context_it_was_logged_in(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = lines
    ctx = CommandContext(request_id="req-1").caused_by("event-9")
    with acting(ctx):
        logger.info("placed %s on %s", "s1", "h1")
    line = json.loads(out.getvalue())
    assert line["message"] == "placed s1 on h1" and line["level"] == "INFO"
    assert line["logger"] == "test.telemetry" and line["time"].endswith("+00:00")
    assert (line["correlation_id"], line["causation_id"]) == ("req-1", "event-9")
    assert line["request_id"] == ctx.request_id


def test_a_line_outside_any_command_has_no_ids_and_an_exception_its_traceback(
    lines: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = lines
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")
    line = json.loads(out.getvalue())
    assert not {"request_id", "correlation_id", "causation_id"} & line.keys()
    assert "ValueError: boom" in line["exception"]


def test_ids_given_by_the_caller_win_over_the_context(lines: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = lines
    with acting(CommandContext(request_id="req-ctx")):
        logger.info("GET /", extra={"request_id": "req-given"})
    assert json.loads(out.getvalue())["request_id"] == "req-given"


def test_text_lines_carry_the_ids_at_their_end() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    with acting(CommandContext(request_id="req-2")):
        ContextIds().filter(record)
    assert record.stratus_ids == " [request_id=req-2 correlation_id=req-2]"  # type: ignore[attr-defined]
    assert json.loads(JsonFormatter().format(record))["request_id"] == "req-2"


def test_ready_only_when_every_check_holds() -> None:
    ready, body = readiness_body(
        [Check("jetstream", True, "log head at 5"), Check("postgresql", False, "away")]
    )
    assert not ready
    assert json.loads(body) == {
        "status": "not ready",
        "checks": {
            "jetstream": {"ok": True, "detail": "log head at 5"},
            "postgresql": {"ok": False, "detail": "away"},
        },
    }
    assert readiness_body([Check("jetstream", True)])[0]


def test_the_lag_is_the_age_of_the_oldest_event_the_read_models_lack() -> None:
    asked: list[int] = []

    def appended(position: int) -> float:
        asked.append(position)
        return 100.0

    assert lag(10, 7, appended, clock=lambda: 130.0) == LogLag(10, 7, 30.0)
    assert asked == [8]
    assert lag(10, 10, appended, clock=lambda: 130.0) == LogLag(10, 10, 0.0)
    assert lag_check(LogLag(10, 7, 30.0), max_lag=3).ok
    assert not lag_check(LogLag(10, 6, 30.0), max_lag=3).ok


def test_the_probes_answer_alive_ready_and_metrics() -> None:
    ready = [Check("jetstream", True)]
    probes = Probes(lambda: ready, [metrics.Collected(lambda: [metrics.gauge("stratus_test_gauge", "t", 7)])])

    def get(path: str) -> tuple[str, bytes]:
        seen: list[str] = []
        body = b"".join(probes({"PATH_INFO": path}, lambda status, headers: seen.append(status)))
        return seen[0], body

    assert get("/healthz") == ("200 OK", b'{"status":"alive"}')
    assert get("/readyz")[0] == "200 OK"
    ready.append(Check("postgresql", False, "away"))
    assert get("/readyz")[0] == "503 Service Unavailable"
    status, text = get("/metrics")
    assert status == "200 OK" and b"stratus_test_gauge 7.0" in text and b"stratus_log_appends_total" in text
    assert get("/elsewhere")[0] == "404 Not Found"


def test_the_telemetry_settings() -> None:
    s = Settings.from_env(
        {
            "STRATUS_LOG_FORMAT": "json",
            "STRATUS_SCHEDULER_METRICS_BIND": "",
            "STRATUS_READY_MAX_LAG": "50",
            "PROMETHEUS_MULTIPROC_DIR": "/run/stratus/metrics",
        }
    )
    assert (s.log_format, s.scheduler_metrics_bind, s.ready_max_lag) == ("json", "", 50)
    assert str(s.metrics_multiproc_dir) == "/run/stratus/metrics"
    assert Settings.from_env({}).projector_metrics_bind == "127.0.0.1:9181"
    assert Settings.from_env(s.to_env()).log_format == "json"
    with pytest.raises(ValueError, match="STRATUS_LOG_FORMAT"):
        Settings.from_env({"STRATUS_LOG_FORMAT": "xml"})


def test_the_api_is_alive_before_it_is_composed_and_the_metadata_service_shows_guests_no_probes() -> None:
    statuses: list[str] = []
    body = LazyApp(Settings)({"PATH_INFO": "/healthz"}, lambda status, headers: statuses.append(status))
    assert (statuses, b"".join(body)) == (["200 OK"], b'{"status":"alive"}')
    assert LazyApp.answers_probes and not MetadataApp.answers_probes
