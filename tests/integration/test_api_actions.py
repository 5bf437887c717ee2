"""``POST /v2.1/servers/{id}/action`` and ``os-instance-actions`` over the real stack: JetStream,
the projector into PostgreSQL, and a hypervisor worker on libvirt's test driver in a thread.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import libvirt
import pytest

from commands.servers.scheduling import PlaceInstance
from stratus.config import Settings
from stratus.context import CommandContext, acting
from stratus.eventstore import NatsBridge
from tests.fixtures.api import ADMIN, P1, P2, Stack, assert_fault, upload
from tests.fixtures.hypervisor import FAST_RETRY, HOST, stack_host
from tests.fixtures.workers import Worker, eventually
from workers import scheduler as scheduler_worker
from workers.libvirt_driver import LibvirtDriver
from workers.scheduler import SCHEDULER


@dataclasses.dataclass
class Cloud:
    stack: Stack
    conn: libvirt.virConnect
    instances: Path

    def status(self, server_id: str, who: str = P1, after: int | None = None) -> dict[str, Any] | None:
        r = self.stack.get(f"/v2.1/servers/{server_id}", who, after=after)
        if r.status_code == 404:
            return None  # the read model has not seen it yet
        assert r.status_code == 200, r.text
        server: dict[str, Any] = r.json["server"]
        return server if server["OS-EXT-STS:task_state"] is None else None

    def action(self, server_id: str, body: dict[str, Any], who: str = P1) -> Any:
        return self.stack.request("POST", f"/v2.1/servers/{server_id}/action", who, json=body)

    def settled(self, server_id: str, status: str, who: str = P1, after: int | None = None) -> dict[str, Any]:
        """The server in ``status`` with no task, as of a read model past ``after`` (the action's
        position: a read that has not seen the action yet must not count as its end)."""

        def check() -> dict[str, Any] | None:
            s = self.status(server_id, who, after)
            return s if s is not None and s["status"] == status else None

        return eventually(check)


@pytest.fixture
def cloud(
    stack: Stack, api_settings: Settings, bridge: NatsBridge, conn: libvirt.virConnect, tmp_path: Path
) -> Iterator[Cloud]:
    instances = tmp_path / "instances"
    driver = LibvirtDriver(lambda: conn, instances_path=instances)
    worker = stack_host(
        stack.handlers.app, api_settings, bridge, driver, instances, poll=0.1, retry=FAST_RETRY
    )
    try:
        yield Cloud(stack, conn, instances)
    finally:
        worker.close()


def active_server(cloud: Cloud) -> str:
    flavor, _ = cloud.stack.flavor()
    body = {"server": {"name": "vm", "flavorRef": flavor}}
    r = cloud.stack.request("POST", "/v2.1/servers", P1, json=body)
    assert r.status_code == 202, r.text
    server = r.json["server"]["id"]
    eventually(lambda: _registered(cloud))
    # As the scheduler does: in the conversation the create request started.
    with acting(CommandContext(actor=SCHEDULER, correlation_id=r.headers["x-openstack-request-id"])):
        cloud.stack.handlers.place_instance(PlaceInstance(server, HOST))
    cloud.settled(server, "ACTIVE")
    return server


def _registered(cloud: Cloud) -> bool:
    return bool(cloud.stack.get("/v2.1/os-hypervisors", ADMIN).json["hypervisors"])


def test_stop_start_reboot_pause_suspend_through_the_api(cloud: Cloud) -> None:
    server = active_server(cloud)
    steps: list[tuple[dict[str, Any], str, int]] = [
        ({"os-stop": None}, "SHUTOFF", 4),
        ({"os-start": None}, "ACTIVE", 1),
        ({"reboot": {"type": "SOFT"}}, "ACTIVE", 1),
        ({"reboot": {"type": "HARD"}}, "ACTIVE", 1),
        ({"pause": None}, "PAUSED", 3),
        ({"unpause": None}, "ACTIVE", 1),
        ({"suspend": None}, "SUSPENDED", 4),
        ({"resume": None}, "ACTIVE", 1),
    ]
    for body, status, power_state in steps:
        r = cloud.action(server, body)
        assert r.status_code == 202, (body, r.text)
        assert r.text == "" and int(r.headers["X-Stratus-Position"]) > 0  # Nova: no body
        shown = cloud.settled(server, status, after=int(r.headers["X-Stratus-Position"]))
        assert shown["OS-EXT-STS:power_state"] == power_state, body
    assert cloud.conn.lookupByUUIDString(server).state()[0] == libvirt.VIR_DOMAIN_RUNNING


def test_illegal_or_malformed_actions_are_refused_as_nova_does(cloud: Cloud) -> None:
    server = active_server(cloud)
    assert cloud.action(server, {"os-stop": None}).status_code == 202
    cloud.settled(server, "SHUTOFF")
    r = cloud.action(server, {"os-stop": None})
    assert_fault(
        r, 409, "conflictingRequest", f"Cannot 'stop' instance {server} while it is in vm_state stopped"
    )
    assert_fault(cloud.action(server, {"pause": {}}), 409, "conflictingRequest", "vm_state stopped")
    assert_fault(
        cloud.action(server, {"shelve-it": None}), 400, "badRequest", "There is no such action: shelve-it"
    )
    assert_fault(cloud.action(server, {"reboot": {"type": "GENTLE"}}), 400, "badRequest", "reboot.type")
    assert_fault(cloud.action(server, {"reboot": {"type": "HARD", "x": 1}}), 400, "badRequest", "reboot.x")
    assert_fault(cloud.action(server, {"os-start": None, "os-stop": None}), 400, "badRequest")
    # Another project's server does not exist for it.
    assert_fault(cloud.action(server, {"os-start": None}, P2), 404, "itemNotFound")
    assert_fault(cloud.action(server, {"lock": None}, P2), 404, "itemNotFound")


def test_a_locked_server_answers_409_to_its_owner_and_obeys_an_admin(cloud: Cloud) -> None:
    server = active_server(cloud)
    # a reason needs 2.73, above what Stratus serves: refused, as Nova refuses it before 2.73
    reason = {"lock": {"locked_reason": "backup"}}
    assert_fault(cloud.action(server, reason), 400, "badRequest", "locked_reason")
    assert cloud.action(server, {"lock": None}).status_code == 202
    assert_fault(
        cloud.action(server, {"os-stop": None}), 409, "conflictingRequest", f"Instance {server} is locked"
    )
    r = cloud.stack.request("DELETE", f"/v2.1/servers/{server}", P1)
    assert_fault(r, 409, "conflictingRequest", "is locked")
    assert cloud.action(server, {"os-stop": None}, ADMIN).status_code == 202
    cloud.settled(server, "SHUTOFF")
    assert cloud.action(server, {"unlock": None}).status_code == 202
    assert cloud.action(server, {"os-start": None}).status_code == 202
    cloud.settled(server, "ACTIVE")


def test_instance_actions_list_and_show_what_happened(cloud: Cloud) -> None:
    server = active_server(cloud)
    stop = cloud.action(server, {"os-stop": None})
    cloud.settled(server, "SHUTOFF")
    cloud.action(server, {"lock": None})
    r = cloud.stack.get(f"/v2.1/servers/{server}/os-instance-actions", P1)
    assert r.status_code == 200, r.text
    actions = r.json["instanceActions"]
    assert [a["action"] for a in actions] == ["lock", "stop", "create"]
    stopped = actions[1]
    assert stopped["request_id"] == stop.headers["x-openstack-request-id"]
    assert stopped["user_id"] == cloud.stack.user_id("bob")
    assert stopped["project_id"] == cloud.stack.project_id("p1")
    assert stopped["instance_uuid"] == server and stopped["message"] is None

    r = cloud.stack.get(f"/v2.1/servers/{server}/os-instance-actions/{stopped['request_id']}", P1)
    assert r.status_code == 200, r.text
    (event,) = r.json["instanceAction"]["events"]
    assert event["event"] == "compute_stop_instance" and event["result"] == "Success"
    assert event["finish_time"] >= event["start_time"]
    assert "traceback" not in event  # admins only

    created = actions[2]
    r = cloud.stack.get(f"/v2.1/servers/{server}/os-instance-actions/{created['request_id']}", ADMIN)
    names = {e["event"]: e["result"] for e in r.json["instanceAction"]["events"]}
    assert names == {
        "conductor_schedule_and_build_instances": "Success",
        "compute__do_build_and_run_instance": "Success",
    }
    assert_fault(cloud.stack.get(f"/v2.1/servers/{server}/os-instance-actions", P2), 404, "itemNotFound")
    r = cloud.stack.get(f"/v2.1/servers/{server}/os-instance-actions/req-nope", P1)
    assert_fault(r, 404, "itemNotFound")


def test_console_output_comes_from_the_host(cloud: Cloud) -> None:
    server = active_server(cloud)
    log = cloud.instances / server / "console.log"
    log.write_text("booting\nSTRATUS-GUEST-READY\n")
    r = cloud.action(server, {"os-getConsoleOutput": {"length": 1}})
    assert r.status_code == 200, r.text
    assert r.json == {"output": "STRATUS-GUEST-READY\n"}
    r = cloud.action(server, {"os-getConsoleOutput": {}})
    assert r.json == {"output": "booting\nSTRATUS-GUEST-READY\n"}
    log.unlink()
    assert_fault(cloud.action(server, {"os-getConsoleOutput": {}}), 404, "itemNotFound", "console")
    assert_fault(cloud.action(server, {"os-getConsoleOutput": {}}, P2), 404, "itemNotFound")


def test_rebuild_boots_the_new_image_on_the_same_host(cloud: Cloud) -> None:
    server = active_server(cloud)
    image = upload(cloud.stack, b"\0" * 4096, P1, name="new-root")
    started_as = cloud.conn.lookupByUUIDString(server).ID()
    r = cloud.action(server, {"rebuild": {"imageRef": image["id"]}})
    assert r.status_code == 202, r.text
    answered = r.json["server"]
    assert (answered["image"]["id"], answered["id"]) == (image["id"], server)
    assert answered["status"] in ("REBUILD", "ACTIVE")  # as read back: the test driver may be done already
    shown = cloud.settled(server, "ACTIVE", after=int(r.headers["X-Stratus-Position"]))
    assert shown["image"]["id"] == image["id"] and shown["OS-EXT-STS:power_state"] == 1
    guest = cloud.conn.lookupByUUIDString(server)
    assert guest.state()[0] == libvirt.VIR_DOMAIN_RUNNING and guest.ID() != started_as  # a new guest
    events = cloud.stack.get(f"/v2.1/servers/{server}/os-instance-actions", P1).json["instanceActions"]
    assert events[0]["action"] == "rebuild"
    # a stopped server is rebuilt stopped (Nova): the new guest is defined, then shut off again
    r = cloud.action(server, {"os-stop": None})
    cloud.settled(server, "SHUTOFF", after=int(r.headers["X-Stratus-Position"]))
    r = cloud.action(server, {"rebuild": {"imageRef": image["id"]}})
    assert r.status_code == 202, r.text
    shown = cloud.settled(server, "SHUTOFF", after=int(r.headers["X-Stratus-Position"]))
    assert shown["OS-EXT-STS:power_state"] == 4
    assert cloud.conn.lookupByUUIDString(server).state()[0] == libvirt.VIR_DOMAIN_SHUTOFF
    r = cloud.action(server, {"os-start": None})
    cloud.settled(server, "ACTIVE", after=int(r.headers["X-Stratus-Position"]))
    # Nova's guards: a paused server is not rebuilt; an unknown image is the request's fault; another
    # project's server is not there
    r = cloud.action(server, {"pause": None})
    cloud.settled(server, "PAUSED", after=int(r.headers["X-Stratus-Position"]))
    assert_fault(
        cloud.action(server, {"rebuild": {"imageRef": image["id"]}}), 409, "conflictingRequest", "paused"
    )
    unknown = {"rebuild": {"imageRef": "0c2f5c4e-0000-4000-8000-000000000000"}}
    assert_fault(cloud.action(server, unknown), 400, "badRequest", "could not be found")
    assert_fault(cloud.action(server, {"rebuild": {"imageRef": image["id"]}}, who=P2), 404, "itemNotFound")
    assert_fault(cloud.action(server, {"rebuild": {"imageRef": image["id"], "x": 1}}), 400, "badRequest")


def test_shelve_frees_the_host_and_unshelve_places_it_again(
    cloud: Cloud, api_settings: Settings, bridge: NatsBridge
) -> None:
    server = active_server(cloud)

    def vcpus_used(after: int) -> int:
        (host,) = cloud.stack.get("/v2.1/os-hypervisors/detail", ADMIN, after=after).json["hypervisors"]
        return int(host["vcpus_used"])

    r = cloud.action(server, {"shelve": None})
    assert r.status_code == 202, r.text
    shelved = cloud.settled(server, "SHELVED_OFFLOADED", after=int(r.headers["X-Stratus-Position"]))
    assert shelved["hostId"] == "" and shelved["OS-EXT-STS:power_state"] == 4
    with pytest.raises(libvirt.libvirtError):
        cloud.conn.lookupByUUIDString(server)  # offloaded: no domain left on the host
    assert vcpus_used(int(r.headers["X-Stratus-Position"])) == 0  # the host's resources are free
    assert_fault(cloud.action(server, {"shelve": None}), 409, "conflictingRequest", "shelved_offloaded")
    assert_fault(cloud.action(server, {"os-start": None}), 409, "conflictingRequest")

    settings = dataclasses.replace(api_settings, host_name=HOST)

    def schedule(stop: threading.Event) -> None:
        scheduler_worker.run(settings, bridge=bridge, app=cloud.stack.handlers.app, stop=stop, poll=0.1)

    placing = Worker(schedule)
    try:
        # no host can take it: Nova's conductor leaves it shelved, with no task (and Stratus a fault)
        disable = {"host": HOST, "binary": "nova-compute"}
        assert cloud.stack.request("PUT", "/v2.1/os-services/disable", ADMIN, json=disable).status_code == 200
        r = cloud.action(server, {"unshelve": None})
        assert r.status_code == 202, r.text
        still = cloud.settled(server, "SHELVED_OFFLOADED", after=int(r.headers["X-Stratus-Position"]))
        assert "No valid host" in cloud.stack.handlers.instance(server).fault["message"]  # type: ignore[index]
        assert still["OS-EXT-STS:vm_state"] == "shelved_offloaded"
        listed = cloud.stack.get(f"/v2.1/servers/{server}/os-instance-actions", P1).json["instanceActions"]
        unshelve = listed[0]
        assert (unshelve["action"], unshelve["message"]) == ("unshelve", "Error")
        assert cloud.stack.request("PUT", "/v2.1/os-services/enable", ADMIN, json=disable).status_code == 200
        r = cloud.action(server, {"unshelve": None})
        assert r.status_code == 202, r.text
        back = cloud.settled(server, "ACTIVE", after=int(r.headers["X-Stratus-Position"]))
    finally:
        placing.close()
    assert back["hostId"] != "" and back["OS-EXT-STS:power_state"] == 1
    assert cloud.conn.lookupByUUIDString(server).state()[0] == libvirt.VIR_DOMAIN_RUNNING
    assert vcpus_used(0) == 1
    events = cloud.stack.get(f"/v2.1/servers/{server}/os-instance-actions", P1).json["instanceActions"]
    assert [e["action"] for e in events[:3]] == ["unshelve", "unshelve", "shelve"]
    assert_fault(cloud.action(server, {"unshelve": None}), 409, "conflictingRequest", "unshelve")


def test_resize_and_migrate_are_refused_as_nova_does(cloud: Cloud) -> None:
    """What can be refused at once is: the wrong flavor, the wrong state, the wrong caller, a
    host before microversion 2.56. (The moves themselves: tests/integration/test_resize.py, and the CLI's.)"""
    server = active_server(cloud)
    bigger, _ = cloud.stack.flavor(name="m1.bigger", ram=1024, vcpus=2)
    smaller_disk, _ = cloud.stack.flavor(name="m1.nodisk", disk=0)
    current = cloud.status(server)
    assert current is not None
    assert_fault(cloud.action(server, {"resize": {"flavorRef": current["flavor"]["id"]}}), 400, "badRequest",
                 "When resizing, instances must change flavor!")  # fmt: skip
    assert_fault(cloud.action(server, {"resize": {"flavorRef": "nope"}}), 400, "badRequest", "nope")
    assert_fault(cloud.action(server, {"resize": {}}), 400, "badRequest", "flavorRef")
    assert_fault(cloud.action(server, {"resize": {"flavorRef": smaller_disk}}), 400, "badRequest",
                 "Unable to resize disk down")  # fmt: skip
    assert_fault(cloud.action(server, {"confirmResize": None}), 409, "conflictingRequest",
                 f"Cannot 'confirmResize' instance {server} while it is in vm_state active")  # fmt: skip
    assert_fault(cloud.action(server, {"revertResize": None}), 409, "conflictingRequest", "vm_state active")
    assert_fault(cloud.action(server, {"migrate": None}), 403, "forbidden", "os-migrate-server:migrate")
    assert_fault(cloud.action(server, {"migrate": {"host": HOST}}, ADMIN), 400, "badRequest", "2.56")
    assert_fault(cloud.action(server, {"shelveOffload": None}), 403, "forbidden", "shelve_offload")
    assert_fault(cloud.action(server, {"shelveOffload": None}, ADMIN), 409, "conflictingRequest",
                 "Cannot 'shelveOffload'")  # fmt: skip
    # over quota: 403 at once, and nothing recorded
    quota = {"quota_set": {"cores": 1}}
    project = cloud.stack.project_id("p1")
    r = cloud.stack.request("PUT", f"/v2.1/os-quota-sets/{project}", ADMIN, json=quota)
    assert r.status_code == 200, r.text
    assert_fault(cloud.action(server, {"resize": {"flavorRef": bigger}}), 403, "forbidden",
                 "Quota exceeded for cores")  # fmt: skip
    shown = cloud.status(server)
    assert shown is not None and shown["status"] == "ACTIVE"
