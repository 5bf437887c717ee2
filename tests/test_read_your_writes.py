"""Every write answers its log position (``X-Stratus-Position``), Compute and Identity alike, and a
read naming it sees the write; bodies stay exactly Nova's and Keystone's."""

from __future__ import annotations

from tests.test_api import ADMIN, P1, Stack, api_settings, projector, stack

__all__ = ["api_settings", "projector", "stack"]


def test_writes_answer_their_position(stack: Stack) -> None:
    r = stack.request(
        "POST", "/v2.1/flavors", ADMIN, json={"flavor": {"name": "f", "ram": 512, "vcpus": 1, "disk": 1}}
    )
    assert r.status_code == 200, r.text
    flavor_position = int(r.headers["X-Stratus-Position"])
    assert set(r.json) == {"flavor"}
    s = stack.request(
        "POST", "/v2.1/servers", P1, json={"server": {"name": "vm", "flavorRef": r.json["flavor"]["id"]}}
    )
    assert s.status_code == 202, s.text
    position = int(s.headers["X-Stratus-Position"])
    assert position > flavor_position and set(s.json) == {"server"}
    sid = s.json["server"]["id"]
    shown = stack.get(f"/v2.1/servers/{sid}", P1, after=position)
    assert shown.status_code == 200 and shown.json["server"]["name"] == "vm"
    d = stack.request("DELETE", f"/v2.1/servers/{sid}", P1)
    assert d.status_code == 204 and int(d.headers["X-Stratus-Position"]) > position
    # identity writes too
    p = stack.request("POST", "/identity/v3/projects", ADMIN, json={"project": {"name": "new-project"}})
    assert p.status_code == 201, p.text
    assert int(p.headers["X-Stratus-Position"]) > position
    # reads answer no position
    assert "X-Stratus-Position" not in stack.get("/v2.1/flavors", ADMIN).headers
