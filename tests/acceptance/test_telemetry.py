"""Telemetry end to end (issue 19): every part a process, with JSON logs and its own ``/metrics``.

One create moves each part's counters, its request id is found with grep in the API's, the
scheduler's and the hypervisor worker's log lines, every line is JSON, and every part is alive and
ready.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pytest

from tests.fixtures.deployed import Http, wait_for
from tests.fixtures.telemetry import PARTS, Stack, get

pytestmark = pytest.mark.slow

HOST = "telemetry-compute"


def test_a_create_moves_every_parts_counters_and_is_followed_by_its_request_id(
    telemetry_stack: Stack,
) -> None:
    stack, http = telemetry_stack, telemetry_stack.http
    wait_for("the host to register", lambda: _hypervisor_up(http))
    before = {part: scrape(stack.probes[part]) for part in PARTS}

    status, _, body = http.call(
        "POST",
        "/v2.1/flavors",
        {"flavor": {"name": "t.small", "id": "t.small", "ram": 128, "vcpus": 1, "disk": 1}},
    )
    assert status == 200, body
    status, headers, body = http.call(
        "POST", "/v2.1/servers", {"server": {"name": "t-vm", "flavorRef": "t.small"}}
    )
    assert status == 202, body
    server_id, request_id = body["server"]["id"], headers["x-openstack-request-id"]
    wait_for("ACTIVE", lambda: _status(http, server_id) == "ACTIVE")

    def moved() -> dict[str, dict[str, float]] | None:
        after = {part: scrape(stack.probes[part]) for part in PARTS}
        projector = after["projector"]
        caught_up = projector.get("stratus_projector_lag_positions") == 0
        return after if caught_up and _value(projector, "stratus_projector_position") > 0 else None

    after = wait_for("the projector to catch up", moved)

    def grew(part: str, name: str) -> bool:
        return _value(after[part], name) > _value(before[part], name)

    api = 'stratus_api_requests_total{method="POST",route="/v2.1/servers",status="202"}'
    assert grew("api", api), after["api"]
    assert grew("api", 'stratus_api_request_duration_seconds_count{method="POST",route="/v2.1/servers"}')
    assert grew("api", 'stratus_commands_total{command="CreateServer",outcome="accepted"}')
    assert grew("api", 'stratus_log_appends_total{outcome="ok"}')
    assert after["api"]['stratus_hosts{state="up"}'] == 1.0
    # whichever of the API's two gunicorn workers answers the scrape, it counts both's requests
    creates = [_value(scrape(stack.probes["api"]), api) for _ in range(8)]
    assert creates == [_value(after["api"], api)] * 8 == [1.0] * 8
    assert grew("scheduler", 'stratus_log_appends_total{outcome="ok"}')
    assert grew("scheduler", 'stratus_scheduler_placements_total{outcome="placed"}')
    assert grew("scheduler", "stratus_scheduler_decision_seconds_count")
    assert 'stratus_consumer_pending{durable="scheduler"}' in after["scheduler"]
    assert grew("hypervisor", 'stratus_hypervisor_actions_total{action="scheduled",outcome="done"}')
    assert grew("hypervisor", 'stratus_log_appends_total{outcome="ok"}')
    assert grew("projector", "stratus_projector_events_total")
    assert after["projector"]["stratus_projector_lag_seconds"] == 0

    # every line of every part is JSON, and the create's request id is in the API's, the scheduler's
    # and the hypervisor worker's lines (the workers carry it as the conversation's correlation id)
    found: dict[str, list[dict[str, Any]]] = {}
    for part in PARTS:
        lines = stack.log_lines(part)
        parsed = [json.loads(line) for line in lines]
        assert all({"time", "level", "logger", "message"} <= p.keys() for p in parsed), lines[:3]
        found[part] = [p for line, p in zip(lines, parsed, strict=True) if request_id in line]
    assert any(p.get("request_id") == request_id and "/v2.1/servers" in p["message"] for p in found["api"])
    placed = [p for p in found["scheduler"] if p["message"] == f"placed {server_id} on {HOST}"]
    assert placed and placed[0]["correlation_id"] == request_id and placed[0]["causation_id"], found
    booted = [p for p in found["hypervisor"] if p["message"].startswith(f"scheduled {server_id}: done")]
    assert booted and booted[0]["correlation_id"] == request_id and booted[0]["causation_id"], found


def test_every_part_is_alive_and_ready(telemetry_stack: Stack) -> None:
    wait_for("the host to register", lambda: _hypervisor_up(telemetry_stack.http))
    for part, base in telemetry_stack.probes.items():
        assert get(base + "/healthz") == (200, '{"status":"alive"}'), part
        status, body = wait_for(f"the {part} to be ready", functools.partial(_ready, base))
        checks = json.loads(body)["checks"]
        assert checks["jetstream"]["ok"], (part, checks)
        if part in ("api", "projector"):
            assert checks["postgresql"]["ok"] and checks["projector_lag"]["ok"], (part, checks)
    # Nova's own documents are untouched: the version list has no trace of the new paths
    status, _, body = telemetry_stack.http.call("GET", "/")
    assert status == 200 and [v["id"] for v in body["versions"]] == ["v2.0", "v2.1"]


def scrape(base: str) -> dict[str, float]:
    """A part's ``/metrics``: each sample's name with its labels, and its value."""
    status, text = get(base + "/metrics")
    assert status == 200, text
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[_sorted_labels(name)] = float(value)
    return samples


def _sorted_labels(sample: str) -> str:
    """``name{b="2",a="1"}`` as ``name{a="1",b="2"}``: one spelling whatever order a registry writes."""
    m = re.fullmatch(r"([^{]+)\{(.*)\}", sample)
    if not m:
        return sample
    labels = sorted(re.findall(r'(\w+="(?:[^"\\]|\\.)*")', m.group(2)))
    return f"{m.group(1)}{{{','.join(labels)}}}"


def _value(samples: dict[str, float], name: str) -> float:
    """A sample's value (0 when absent); a bare name sums every sample of that name."""
    if "{" in name:
        return samples.get(_sorted_labels(name), 0.0)
    return sum(v for k, v in samples.items() if k == name or k.startswith(name + "{"))


def _ready(base: str) -> tuple[int, str] | None:
    answer = get(base + "/readyz")
    return answer if answer[0] == 200 else None


def _status(http: Http, server_id: str) -> str:
    code, _, body = http.call("GET", f"/v2.1/servers/{server_id}")
    status = body["server"]["status"] if code == 200 else ""
    assert status != "ERROR", body
    return str(status)


def _hypervisor_up(http: Http) -> bool:
    code, _, body = http.call("GET", "/v2.1/os-hypervisors/detail")
    return code == 200 and any(
        h["hypervisor_hostname"] == HOST and h["state"] == "up" for h in body["hypervisors"]
    )
