"""Every write answers its log position (``X-Stratus-Position``, and ``stratus:position`` in the body
beside the resource's own member), Compute and Identity alike, and a read naming it sees the write;
the resource's member stays exactly Nova's and Keystone's."""

from __future__ import annotations

from tests.test_api import ADMIN, P1, Stack, api_settings, projector, stack

__all__ = ["api_settings", "projector", "stack"]


def test_writes_answer_their_position(stack: Stack) -> None:
    r = stack.request(
        "POST", "/v2.1/flavors", ADMIN, json={"flavor": {"name": "f", "ram": 512, "vcpus": 1, "disk": 1}}
    )
    assert r.status_code == 200, r.text
    flavor_position = int(r.headers["X-Stratus-Position"])
    assert set(r.json) == {"flavor", "stratus:position"} and r.json["stratus:position"] == flavor_position
    s = stack.request(
        "POST", "/v2.1/servers", P1, json={"server": {"name": "vm", "flavorRef": r.json["flavor"]["id"]}}
    )
    assert s.status_code == 202, s.text
    position = int(s.headers["X-Stratus-Position"])
    assert position > flavor_position and set(s.json) == {"server", "stratus:position"}
    assert s.json["stratus:position"] == position
    sid = s.json["server"]["id"]
    shown = stack.get(f"/v2.1/servers/{sid}", P1, after=position)
    assert shown.status_code == 200 and shown.json["server"]["name"] == "vm"
    # a write answered without a body by Nova gets one with the position only; a 204 stays empty
    a = stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"lock": None})
    assert a.status_code == 202 and a.json == {"stratus:position": int(a.headers["X-Stratus-Position"])}
    stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"unlock": None})
    m = stack.request("POST", f"/v2.1/servers/{sid}/metadata", P1, json={"metadata": {"k": "v"}})
    assert m.json == {"metadata": {"k": "v"}, "stratus:position": int(m.headers["X-Stratus-Position"])}
    d = stack.request("DELETE", f"/v2.1/servers/{sid}", P1)
    assert d.text == ""
    assert d.status_code == 204 and int(d.headers["X-Stratus-Position"]) > position
    # identity writes too
    p = stack.request("POST", "/identity/v3/projects", ADMIN, json={"project": {"name": "new-project"}})
    assert p.status_code == 201, p.text
    assert int(p.headers["X-Stratus-Position"]) > position
    assert p.json["stratus:position"] == int(p.headers["X-Stratus-Position"]) and "name" in p.json["project"]
    # reads answer no position
    assert "X-Stratus-Position" not in stack.get("/v2.1/flavors", ADMIN).headers
