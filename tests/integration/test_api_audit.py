"""History, past state and past quota usage over HTTP, read from the real JetStream log; the stack
(API, real projector, PostgreSQL) is ``tests.fixtures.api``'s."""

from __future__ import annotations

import itertools
import time
from typing import Any

from commands.hosts.register import RegisterHost
from commands.servers.scheduling import PlaceInstance
from stratus.eventstore import chain
from tests.fixtures.api import ADMIN, ADMIN_P9, P1, P2, Stack


def _scenario(stack: Stack) -> dict[str, Any]:
    flavor, _ = stack.flavor(vcpus=2, ram=1024)
    r = stack.request("POST", "/v2.1/servers", P1, json={"server": {"name": "vm", "flavorRef": flavor}})
    assert r.status_code == 202, r.text
    sid = r.json["server"]["id"]
    created = int(r.headers["X-Stratus-Position"])
    created_request = r.headers["x-openstack-request-id"]
    time.sleep(0.05)
    between = (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1e6) % 1_000_000:06d}Z"
    )
    time.sleep(0.05)
    stack.handlers.register_host(RegisterHost("cmp-1", vcpus=8, memory_mb=16384, disk_gb=100))
    placed = stack.handlers.place_instance(PlaceInstance(sid, "cmp-1")).position
    d = stack.request("DELETE", f"/v2.1/servers/{sid}", P1)
    assert d.status_code == 204, d.text
    deleted = int(d.headers["X-Stratus-Position"])
    shown = stack.get(f"/v2.1/servers/{sid}", ADMIN).json["server"]
    return {
        "project": shown["tenant_id"],
        "user": shown["user_id"],
        "sid": sid,
        "flavor": flavor,
        "created": created,
        "request": created_request,
        "between": between,
        "placed": placed,
        "deleted": deleted,
    }


def test_a_servers_history_names_who_did_what_in_which_request(stack: Stack) -> None:
    s = _scenario(stack)
    r = stack.get(f"/v2.1/stratus/history/server/{s['sid']}", P1)
    assert r.status_code == 200, r.text
    events = r.json["events"]
    types = [e["type"] for e in events]
    assert types[0] == "stratus.instance.requested"
    assert "stratus.instance.scheduled" in types and types[-1] == "stratus.instance.deletionrequested"
    first = events[0]
    assert (first["actoruser"], first["actorproject"]) == (s["user"], s["project"])
    roles = first["actorroles"].split(",")
    assert "member" in roles and "admin" not in roles
    assert first["requestid"] == s["request"] and first["position"] == s["created"]
    assert first["chainprev"] == chain.GENESIS
    for before, after in itertools.pairwise(events):
        assert after["chainprev"] == before["chainhash"]
        assert after["position"] > before["position"]
    assert events[-1]["position"] == s["deleted"]
    assert [e["originatorversion"] for e in events] == list(range(1, len(events) + 1))


def test_history_pages_by_position(stack: Stack) -> None:
    s = _scenario(stack)
    path = f"/v2.1/stratus/history/server/{s['sid']}"
    whole = stack.get(path).json["events"]
    seen, marker = [], None
    while True:
        r = stack.get(path + "?limit=1" + (f"&marker={marker}" if marker else ""))
        assert r.status_code == 200
        seen += r.json["events"]
        marker = r.json.get("next_marker")
        if marker is None:
            break
        assert r.json["links"][0]["rel"] == "next"
    assert seen == whole and len(whole) >= 3


def test_history_keeps_projects_apart(stack: Stack) -> None:
    s = _scenario(stack)
    path = f"/v2.1/stratus/history/server/{s['sid']}"
    assert stack.get(path, P2).status_code == 404
    assert stack.get(path, ADMIN_P9).status_code == 200  # an auditor reads across projects
    assert stack.get("/v2.1/stratus/history/host/cmp-1", P1).status_code == 403
    host = stack.get("/v2.1/stratus/history/host/cmp-1", ADMIN)
    assert host.status_code == 200
    assert [e["type"] for e in host.json["events"]][:2] == [
        "stratus.host.registered",
        "stratus.host.instanceclaimed",
    ]
    flavor = stack.get(f"/v2.1/stratus/history/flavor/{s['flavor']}", ADMIN)
    assert flavor.status_code == 200 and flavor.json["events"][0]["type"] == "stratus.flavor.created"
    assert stack.get("/v2.1/stratus/history/server/not-a-uuid").status_code == 400
    assert stack.get("/v2.1/stratus/history/planet/x").status_code == 400
    assert stack.get("/v2.1/stratus/history/server/00000000-0000-0000-0000-000000000000").status_code == 404
    assert stack.get(path + "?limit=x").status_code == 400


def test_a_server_as_it_was(stack: Stack) -> None:
    s = _scenario(stack)
    path = f"/v2.1/stratus/state/server/{s['sid']}"
    at_create = stack.get(f"{path}?as_of={s['created']}", P1)
    assert at_create.status_code == 200, at_create.text
    assert at_create.json["state"]["vm_state"] == "building" and at_create.json["state"]["host"] is None
    assert at_create.json["version"] == 1 and at_create.json["position"] == s["created"]
    at_place = stack.get(f"{path}?as_of={s['placed']}", ADMIN).json
    assert at_place["state"]["host"] == "cmp-1"
    assert stack.get(f"{path}?as_of={s['placed']}", P1).json["state"]["host"] is None  # hosts: for admins
    now = stack.get(f"{path}?as_of={s['deleted']}", P1).json
    assert now["state"]["task_state"] == "deleting"
    by_time = stack.get(f"{path}?as_of={s['between']}", P1)
    assert by_time.status_code == 200, by_time.text
    assert by_time.json["version"] == 1
    assert stack.get(f"{path}?as_of={s['created'] - 1}", P1).status_code == 404  # not yet requested
    assert stack.get(f"{path}?as_of=2000-01-01T00:00:00Z", P1).status_code == 404
    assert stack.get(f"{path}?as_of=yesterday", P1).status_code == 400
    assert stack.get(path, P1).status_code == 400
    assert stack.get(f"{path}?as_of={s['created']}", P2).status_code == 404


def test_a_projects_quota_usage_as_it_was(stack: Stack) -> None:
    s = _scenario(stack)
    before = stack.get(f"/v2.1/stratus/usage/{s['project']}?as_of={s['created'] - 1}", P1)
    assert before.status_code == 200, before.text
    assert before.json["usage"]["instances"] == 0
    during = stack.get(f"/v2.1/stratus/usage/{s['project']}?as_of={s['placed']}", P1).json["usage"]
    assert (during["instances"], during["cores"], during["ram"]) == (1, 2, 1024)
    assert during["servers"] == [s["sid"]]
    by_time = stack.get(f"/v2.1/stratus/usage/{s['project']}?as_of={s['between']}", P1).json["usage"]
    assert by_time["instances"] == 1
    assert stack.get(f"/v2.1/stratus/usage/{s['project']}?as_of={s['placed']}", P2).status_code == 403
    assert stack.get(f"/v2.1/stratus/usage/{s['project']}?as_of={s['placed']}", ADMIN_P9).status_code == 200


def test_a_projects_history_holds_its_role_grants_for_auditors(stack: Stack) -> None:
    stack.auth(P1)  # the persona's user and project are created, and a role granted
    project = stack.project_id("p1")
    path = f"/v2.1/stratus/history/project/{project}"
    r = stack.get(path, ADMIN)
    assert r.status_code == 200, r.text
    types = [e["type"] for e in r.json["events"]]
    assert types[0] == "stratus.project.created" and "stratus.project.rolegranted" in types
    assert stack.get(path, P1).status_code == 403
    assert stack.get("/v2.1/stratus/history/project/not-hex", ADMIN).status_code == 400


def test_the_hash_chain_verified_over_http_for_auditors_only(stack: Stack) -> None:
    s = _scenario(stack)
    path = "/v2.1/stratus/audit/verify"
    r = stack.get(path, ADMIN)
    assert r.status_code == 200, r.text
    report = r.json["verification"]
    assert report["ok"] is True and report["first_break"] is None
    assert report["last_position"] >= s["deleted"] and report["checked"] == report["last_position"]
    assert report["anchor"] == f"{report['last_position']}:{report['global_hash']}"
    # the anchor recorded holds later; a forged one does not, and the report names where
    held = stack.get(f"{path}?anchor={report['anchor']}", ADMIN_P9).json["verification"]
    assert held["ok"] is True and held["anchors_checked"] == [report["last_position"]]
    forged = f"{s['created']}:{'0' * 64}"
    broken = stack.get(f"{path}?anchor={forged}", ADMIN).json["verification"]
    assert broken["ok"] is False and broken["anchor"] is None
    assert broken["first_break"]["position"] == s["created"]
    upto = stack.get(f"{path}?upto={s['created']}", ADMIN).json["verification"]
    assert upto["last_position"] == s["created"] and upto["checked"] == s["created"]
    assert stack.get(path, P1).status_code == 403  # a member, even of the project whose events these are
    for bad in ("upto=0", "upto=x", "anchor=5", f"anchor=x:{'0' * 64}", "anchor=5:abc"):
        assert stack.get(f"{path}?{bad}", ADMIN).status_code == 400, bad
