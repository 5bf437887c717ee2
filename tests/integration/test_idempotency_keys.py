"""``Idempotency-Key`` on mutating requests, over the real stack (JetStream, the projector into
PostgreSQL): a retry with the key acts once and gets the first answer, even when the first run's
append reached the log and its answer never reached the client; the key reused for another request
is refused with 422.
"""

from __future__ import annotations

import base64
from typing import Any
from uuid import UUID

import falcon

from commands.hosts.register import RegisterHost
from commands.idempotency import IdempotencyKey, key_id
from commands.instance import Instance
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from tests.fixtures.api import ADMIN, P1, P2, Stack, assert_fault

RUNNING = 1


class DiesAfterActing:
    """Middleware innermost of the app: the worker appended the request's events, then failed before
    answering (a crash, a lost connection): the client sees a 500, the log has the effect."""

    def __init__(self) -> None:
        self.armed = True

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if self.armed and req_succeeded and req.get_header("Idempotency-Key"):
            self.armed = False
            raise RuntimeError("the API worker died after appending")


def active_server(stack: Stack) -> str:
    """A server of P1's project, ACTIVE on a host (as the scheduler and the host would make it)."""
    flavor_id, _ = stack.flavor()
    stack.handlers.register_host(RegisterHost("cmp-1", vcpus=8, memory_mb=16384, disk_gb=100))
    sid, _ = stack.server(flavor_id, P1)
    bus = stack.handlers.bus
    bus.handle(PlaceInstance(sid, "cmp-1"))
    bus.handle(StartSpawning(sid, "cmp-1"))
    bus.handle(FinishSpawning(sid, RUNNING))
    return sid


def version(stack: Stack, server_id: str) -> int:
    inst: object = stack.handlers.app.repository.get(UUID(server_id))
    assert isinstance(inst, Instance)
    return int(inst.version)


def action(stack: Stack, sid: str, body: dict[str, Any], key: str | None = None, who: str = P1) -> Any:
    headers = stack.auth(who) | ({"Idempotency-Key": key} if key else {})
    return stack.request("POST", f"/v2.1/servers/{sid}/action", headers, json=body)


def test_a_retried_action_acts_once_and_answers_as_the_first_time(stack: Stack) -> None:
    sid = active_server(stack)
    first = action(stack, sid, {"os-stop": None}, key="stop-1")
    assert first.status_code == 202, first.text
    acted = version(stack, sid)

    again = action(stack, sid, {"os-stop": None}, key="stop-1")
    assert again.status_code == 202 and again.text == first.text == ""
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["X-Stratus-Position"] == first.headers["X-Stratus-Position"]
    assert version(stack, sid) == acted  # no second effect

    # The same request without a key is a new request: the stop already under way refuses it.
    assert action(stack, sid, {"os-stop": None}).status_code == 409
    # Keys are per project: another project's identical key is another key (and 404s here).
    assert action(stack, sid, {"os-stop": None}, key="stop-1", who=P2).status_code == 404


def test_the_key_reused_for_another_request_is_refused(stack: Stack) -> None:
    sid = active_server(stack)
    assert action(stack, sid, {"reboot": {"type": "SOFT"}}, key="k").status_code == 202
    acted = version(stack, sid)
    for other in ({"reboot": {"type": "HARD"}}, {"os-stop": None}):
        r = action(stack, sid, other, key="k")
        assert_fault(r, 422, "computeFault", "Idempotency-Key")
        assert r.headers["X-Stratus-Error-Code"] == "stratus.idempotency_key_reused"
    assert version(stack, sid) == acted


def test_a_request_that_acted_and_failed_before_answering_gets_its_answer_on_retry(stack: Stack) -> None:
    sid = active_server(stack)
    dies = DiesAfterActing()
    stack.app.add_middleware([dies])  # innermost: it fails before the answer is recorded
    lost = action(stack, sid, {"reboot": {"type": "HARD"}}, key="reboot-1")
    assert lost.status_code == 500 and not dies.armed
    acted = version(stack, sid)  # the reboot is on the log, the client does not know

    retried = action(stack, sid, {"reboot": {"type": "HARD"}}, key="reboot-1")
    assert retried.status_code == 202 and retried.text == ""
    assert version(stack, sid) == acted
    assert int(retried.headers["X-Stratus-Position"]) >= 1

    # The rebuilt answer is now the recorded one.
    third = action(stack, sid, {"reboot": {"type": "HARD"}}, key="reboot-1")
    assert (third.status_code, third.headers["Idempotent-Replayed"]) == (202, "true")
    assert version(stack, sid) == acted


def test_a_lost_flavor_create_answers_with_the_flavor_it_made(stack: Stack) -> None:
    stack.app.add_middleware([DiesAfterActing()])
    body = {"flavor": {"name": "m1.once", "ram": 512, "vcpus": 1, "disk": 1}}  # the API draws the id
    headers = {**stack.auth(ADMIN), "Idempotency-Key": "flavor-1"}
    assert stack.request("POST", "/v2.1/flavors", headers, json=body).status_code == 500

    retried = stack.request("POST", "/v2.1/flavors", headers, json=body)
    assert retried.status_code == 200, retried.text
    flavor = retried.json["flavor"]
    after = int(retried.headers["X-Stratus-Position"])
    listed = stack.get("/v2.1/flavors/detail", ADMIN, after=after).json["flavors"]
    assert [f["id"] for f in listed if f["name"] == "m1.once"] == [flavor["id"]]
    assert flavor == next(f for f in listed if f["id"] == flavor["id"])  # Nova's exact keys

    replayed = stack.request("POST", "/v2.1/flavors", headers, json=body)
    assert (replayed.status_code, replayed.json) == (200, retried.json)


def test_a_retried_delete_and_metadata_put_act_once(stack: Stack) -> None:
    sid = active_server(stack)
    meta = {"metadata": {"a": "1"}}
    put = [
        stack.request(
            "PUT", f"/v2.1/servers/{sid}/metadata", stack.auth(P1) | {"Idempotency-Key": "m"}, json=meta
        )
        for _ in range(2)
    ]
    assert [r.status_code for r in put] == [200, 200] and put[0].json == put[1].json == meta
    acted = version(stack, sid)

    delete = [
        stack.request("DELETE", f"/v2.1/servers/{sid}", stack.auth(P1) | {"Idempotency-Key": "d"})
        for _ in range(2)
    ]
    assert [r.status_code for r in delete] == [204, 204]
    assert version(stack, sid) == acted + 1  # one delete requested


def test_a_retried_keystone_create_makes_one_project(stack: Stack) -> None:
    body = {"project": {"name": "once", "domain_id": "default"}}
    headers = {**stack.auth(ADMIN), "Idempotency-Key": "project-1"}
    first = stack.request("POST", "/identity/v3/projects", headers, json=body)
    again = stack.request("POST", "/identity/v3/projects", headers, json=body)
    assert first.status_code == again.status_code == 201, first.text
    assert first.json == again.json
    refused = stack.request("POST", "/identity/v3/projects", headers, json={"project": {"name": "twice"}})
    assert refused.status_code == 422 and set(refused.json) == {"error"}  # Keystone's error shape
    assert refused.json["error"]["code"] == 422


def test_a_request_refused_before_acting_leaves_the_key_free(stack: Stack) -> None:
    sid = active_server(stack)
    missing = "00000000-0000-4000-8000-000000000000"
    assert action(stack, missing, {"os-stop": None}, key="free").status_code == 404
    r = action(stack, sid, {"os-stop": None}, key="free")  # another request, and yet not a reuse
    assert r.status_code == 202 and "Idempotent-Replayed" not in r.headers


def test_a_malformed_key_is_refused(stack: Stack) -> None:
    sid = active_server(stack)
    r = action(stack, sid, {"os-stop": None}, key="k" * 256)
    assert_fault(r, 400, "badRequest", "Idempotency-Key")


def test_placement_writes_take_the_key_and_refuse_its_reuse_in_placement_shape(stack: Stack) -> None:
    headers = {**stack.auth(ADMIN), "OpenStack-API-Version": "placement 1.20", "Idempotency-Key": "rp-1"}
    first, again = (
        stack.request("POST", "/placement/resource_providers", headers, json={"name": "rp-once"})
        for _ in range(2)
    )
    assert first.status_code == again.status_code == 200, first.text
    assert first.json == again.json and again.headers["Idempotent-Replayed"] == "true"
    listed = stack.request("GET", "/placement/resource_providers?name=rp-once", headers).json
    assert [p["uuid"] for p in listed["resource_providers"]] == [first.json["uuid"]]

    other = stack.request("POST", "/placement/resource_providers", headers, json={"name": "rp-twice"})
    assert other.status_code == 422
    (error,) = other.json["errors"]
    assert error["code"] == "stratus.idempotency_key_reused" and error["status"] == 422


def test_the_recorded_answer_keeps_no_user_data(stack: Stack) -> None:
    flavor_id, _ = stack.flavor()
    secret = base64.b64encode(b"#!/bin/sh\necho s3cr3t\n").decode()
    sid, _ = stack.server(flavor_id, ADMIN, user_data=secret)
    headers = {**stack.auth(ADMIN), "OpenStack-API-Version": "compute 2.75", "Idempotency-Key": "rename"}
    body = {"server": {"name": "renamed"}}
    first = stack.request("PUT", f"/v2.1/servers/{sid}", headers, json=body)
    assert first.status_code == 200, first.text
    assert first.json["server"]["OS-EXT-SRV-ATTR:user_data"] == secret  # the client got it once
    replayed = stack.request("PUT", f"/v2.1/servers/{sid}", headers, json=body)
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert replayed.json["server"]["OS-EXT-SRV-ATTR:user_data"] == ""  # the key stays, not the value
    assert replayed.json["server"]["name"] == "renamed"
    record: object = stack.handlers.app.repository.get(key_id(stack.project_id("p1"), "rename"))
    assert isinstance(record, IdempotencyKey) and record.answer is not None
    assert secret not in record.answer[1]
