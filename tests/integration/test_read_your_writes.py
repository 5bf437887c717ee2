"""Every write answers its log position in the ``X-Stratus-Position`` header, Compute and Identity
alike, and a read naming it sees the write; the bodies stay exactly Nova's and Keystone's (no
Stratus member in them: strict clients refuse unknown keys)."""

from __future__ import annotations

from tests.fixtures.api import ADMIN, P1, Stack


def test_writes_answer_their_position(stack: Stack) -> None:
    r = stack.request(
        "POST", "/v2.1/flavors", ADMIN, json={"flavor": {"name": "f", "ram": 512, "vcpus": 1, "disk": 1}}
    )
    assert r.status_code == 200, r.text
    flavor_position = int(r.headers["X-Stratus-Position"])
    assert set(r.json) == {"flavor"} and flavor_position > 0
    s = stack.request(
        "POST", "/v2.1/servers", P1, json={"server": {"name": "vm", "flavorRef": r.json["flavor"]["id"]}}
    )
    assert s.status_code == 202, s.text
    position = int(s.headers["X-Stratus-Position"])
    assert position > flavor_position and set(s.json) == {"server"}
    sid = s.json["server"]["id"]
    shown = stack.get(f"/v2.1/servers/{sid}", P1, after=position)
    assert shown.status_code == 200 and shown.json["server"]["name"] == "vm"
    # a write Nova answers without a body has none here either: the position is in the header
    a = stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"lock": None})
    assert a.status_code == 202 and a.text == "" and int(a.headers["X-Stratus-Position"]) > position
    stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"unlock": None})
    m = stack.request("POST", f"/v2.1/servers/{sid}/metadata", P1, json={"metadata": {"k": "v"}})
    assert m.json == {"metadata": {"k": "v"}} and int(m.headers["X-Stratus-Position"]) > position
    d = stack.request("DELETE", f"/v2.1/servers/{sid}", P1)
    assert d.text == ""
    assert d.status_code == 204 and int(d.headers["X-Stratus-Position"]) > position
    # identity writes too
    p = stack.request("POST", "/identity/v3/projects", ADMIN, json={"project": {"name": "new-project"}})
    assert p.status_code == 201, p.text
    assert int(p.headers["X-Stratus-Position"]) > position
    assert set(p.json) == {"project"} and p.json["project"]["name"] == "new-project"
    # reads answer no position
    assert "X-Stratus-Position" not in stack.get("/v2.1/flavors", ADMIN).headers


def test_a_client_reads_its_own_writes_without_naming_a_position(stack: Stack) -> None:
    """Clients that know nothing of X-Stratus-Min-Position (tempest, the stock CLI) read right after
    writing: the API process waits for the writer's last position on that user's reads."""
    for i in range(10):
        body = {"flavor": {"name": f"f{i}", "ram": 512, "vcpus": 1, "disk": 1, "id": f"f{i}"}}
        assert stack.request("POST", "/v2.1/flavors", ADMIN, json=body).status_code == 200
        listed = stack.request("GET", "/v2.1/flavors/detail", ADMIN).json["flavors"]
        assert f"f{i}" in [f["id"] for f in listed], i
