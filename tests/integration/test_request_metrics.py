"""The API's request metrics (api/telemetry.py ``RequestMetrics``): every answer counted once under
its method, route template and status, and timed once under its method and route, whatever the
series the middleware keeps at hand (a request answered like the one before it, or unlike it)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from api.telemetry import UNMATCHED
from tests.fixtures.api import Stack

FLAVORS = "/v2.1/flavors/detail"


def _count(route: str, status: int) -> float:
    labels = {"method": "GET", "route": route, "status": str(status)}
    return REGISTRY.get_sample_value("stratus_api_requests_total", labels) or 0.0


def _timed(route: str, sample: str, **more: str) -> float:
    labels = {"method": "GET", "route": route, **more}
    return REGISTRY.get_sample_value(f"stratus_api_request_duration_seconds_{sample}", labels) or 0.0


def _snapshot() -> dict[str, float]:
    return {
        "ok": _count(FLAVORS, 200),
        "bad": _count(FLAVORS, 400),
        "refused": _count(FLAVORS, 401),
        "unmatched": _count(UNMATCHED, 404),
        "flavors timed": _timed(FLAVORS, "count"),
        "flavors under 30 s": _timed(FLAVORS, "bucket", le="30.0"),
        "flavors in all": _timed(FLAVORS, "bucket", le="+Inf"),
        "flavors seconds": _timed(FLAVORS, "sum"),
        "unmatched timed": _timed(UNMATCHED, "count"),
    }


def test_each_answer_is_counted_and_timed_once_under_its_route_and_status(stack: Stack) -> None:
    before = _snapshot()
    statuses = [
        stack.get(f"{FLAVORS}?limit=1").status_code,
        stack.get(f"{FLAVORS}?limit=-1").status_code,
        stack.get(f"{FLAVORS}?limit=1").status_code,
        stack.client.simulate_get(FLAVORS).status_code,  # no token
        stack.get("/v2.1/no-such-route").status_code,
        stack.get(f"{FLAVORS}?limit=-1").status_code,
        stack.get(f"{FLAVORS}?limit=1").status_code,
    ]
    assert statuses == [200, 400, 200, 401, 404, 400, 200]
    after = _snapshot()
    grew = {name: after[name] - before[name] for name in before if name != "flavors seconds"}
    assert grew == {
        "ok": 3,
        "bad": 2,
        "refused": 1,
        "unmatched": 1,
        "flavors timed": 6,
        "flavors under 30 s": 6,
        "flavors in all": 6,
        "unmatched timed": 1,
    }
    assert after["flavors seconds"] > before["flavors seconds"]
