"""``config_drive`` over HTTP: accepted at create as Nova's ``parameter_types.boolean`` (every
microversion), recorded on the instance, and shown as Nova's string field ("True" or "") in show and
detail; real JetStream, PostgreSQL and projector (``tests.fixtures.api``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.api import P1, Stack, assert_fault


def create(stack: Stack, version: str, **fields: Any) -> Any:
    networks = {} if version == "2.1" else {"networks": "none"}  # required from 2.37
    body = {"server": {"name": "vm", "flavorRef": "tiny", **networks, **fields}}
    headers = {**stack.headers(P1), "OpenStack-API-Version": f"compute {version}"}
    return stack.request("POST", "/v2.1/servers", headers, json=body)


def shown(stack: Stack, version: str, r: Any) -> Any:
    assert r.status_code == 202, r.text
    sid = r.json["server"]["id"]
    headers = {**stack.headers(P1), "OpenStack-API-Version": f"compute {version}"}
    headers["X-Stratus-Min-Position"] = r.headers["X-Stratus-Position"]
    return stack.request("GET", f"/v2.1/servers/{sid}", headers).json["server"]["config_drive"]


@pytest.mark.parametrize("version", ["2.1", "2.47", "2.100", "2.104"])
def test_config_drive_at_create_is_shown_at_every_microversion(stack: Stack, version: str) -> None:
    stack.flavor(id="tiny")
    assert shown(stack, version, create(stack, version, config_drive=True)) == "True"
    assert shown(stack, version, create(stack, version, config_drive="yes")) == "True"
    assert shown(stack, version, create(stack, version, config_drive="False")) == ""
    r = create(stack, version)
    assert shown(stack, version, r) == ""
    assert stack.handlers.instance(r.json["server"]["id"]).config_drive is False


def test_config_drive_is_in_the_detail_list_and_refused_when_not_a_boolean(stack: Stack) -> None:
    stack.flavor(id="tiny")
    r = create(stack, "2.1", config_drive=True)
    assert r.status_code == 202, r.text
    sid = r.json["server"]["id"]
    assert stack.handlers.instance(sid).config_drive is True
    detail = stack.get("/v2.1/servers/detail", P1, after=int(r.headers["X-Stratus-Position"])).json
    assert [s["config_drive"] for s in detail["servers"] if s["id"] == sid] == ["True"]
    assert_fault(create(stack, "2.1", config_drive="maybe"), 400, "badRequest", "config_drive")
    assert_fault(create(stack, "2.1", config_drive=1), 400, "badRequest", "config_drive")
