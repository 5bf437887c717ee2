"""Power actions and locks end to end below the API: real JetStream, the hypervisor worker on
libvirt's test driver.

Every action moves through its task state to Nova's end state while libvirt's view agrees; illegal
actions are refused with Nova's message; two actions racing on one server never both apply;
hypervisor failures end the action cleanly (retried when temporary, a fault when permanent, ERROR
when the guest is gone); console output is answered by the host over core NATS.
"""

from __future__ import annotations

import threading
from pathlib import Path

import libvirt
import pytest
from eventsourcing.persistence import IntegrityError

from commands.errors import Forbidden, InstanceLocked, InvalidState
from commands.instance import Instance
from commands.servers.actions import LockServer, RequestAction, UnlockServer
from commands.servers.delete import DeleteServer
from commands.states import PowerState, VmState
from stratus import hostrpc
from stratus.eventstore import NatsBridge
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.lifecycle import LifecycleHandlers
from tests.fixtures.hypervisor import HOST, FlakyDriver, Hosted, gone, settled
from tests.fixtures.workers import Worker, eventually
from workers.libvirt_driver import LibvirtDriver
from workers.outcome import DONE
from workers.power import ACTION_FAILED, PowerActions
from workers.virt import PermanentVirtError, TemporaryVirtError

pytestmark = pytest.mark.flavors(M1_SMALL)

_LIBVIRT_STATE = {
    VmState.ACTIVE: libvirt.VIR_DOMAIN_RUNNING,
    VmState.STOPPED: libvirt.VIR_DOMAIN_SHUTOFF,
    VmState.PAUSED: libvirt.VIR_DOMAIN_PAUSED,
    VmState.SUSPENDED: libvirt.VIR_DOMAIN_SHUTOFF,
}


def idle(handlers: Handlers, server_id: str) -> Instance | None:
    inst = handlers.instance(server_id)
    return inst if inst.task_state is None else None


def act(handlers: Handlers, server_id: str, action: str, *, admin: bool = False) -> Instance:
    """Request ``action`` as the owner (or an admin) and wait until the host has carried it out."""
    LifecycleHandlers(handlers).request_action(RequestAction(server_id, "p1", action, admin=admin))
    return eventually(lambda: idle(handlers, server_id))


def test_every_action_reaches_novas_state_and_libvirt_agrees(
    handlers: Handlers, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    server, _ = active
    steps = [
        ("stop", VmState.STOPPED, PowerState.SHUTDOWN),
        ("start", VmState.ACTIVE, PowerState.RUNNING),
        ("reboot", VmState.ACTIVE, PowerState.RUNNING),
        ("reboot_hard", VmState.ACTIVE, PowerState.RUNNING),
        ("pause", VmState.PAUSED, PowerState.PAUSED),
        ("unpause", VmState.ACTIVE, PowerState.RUNNING),
        ("suspend", VmState.SUSPENDED, PowerState.SHUTDOWN),
        ("resume", VmState.ACTIVE, PowerState.RUNNING),
        ("stop", VmState.STOPPED, PowerState.SHUTDOWN),
        ("reboot_hard", VmState.ACTIVE, PowerState.RUNNING),  # a hard reboot also boots a stopped server
    ]
    for action, vm_state, power_state in steps:
        inst = act(handlers, server, action)
        assert (action, inst.vm_state, inst.power_state) == (action, vm_state, power_state)
        assert conn.lookupByUUIDString(server).state()[0] == _LIBVIRT_STATE[vm_state], action
    assert conn.lookupByUUIDString(server).hasManagedSaveImage(0) == 0  # resumed from it, then gone


def test_illegal_actions_are_refused_with_novas_message(
    handlers: Handlers, active: tuple[str, Worker]
) -> None:
    server, _ = active
    lifecycle = LifecycleHandlers(handlers)
    with pytest.raises(InvalidState) as e:
        lifecycle.request_action(RequestAction(server, "p1", "start"))
    assert e.value.message == f"Cannot 'start' instance {server} while it is in vm_state active"
    with pytest.raises(InvalidState) as e:
        lifecycle.request_action(RequestAction(server, "p1", "unpause"))
    assert e.value.message == f"Cannot 'unpause' instance {server} while it is in vm_state active"
    act(handlers, server, "stop")
    with pytest.raises(InvalidState) as e:
        lifecycle.request_action(RequestAction(server, "p1", "stop"))
    assert e.value.message == f"Cannot 'stop' instance {server} while it is in vm_state stopped"
    for refused in ("reboot", "pause", "suspend", "resume"):
        with pytest.raises(InvalidState):
            lifecycle.request_action(RequestAction(server, "p1", refused))
    assert handlers.instance(server).task_state is None  # nothing was recorded


def test_two_actions_racing_on_one_server_never_both_apply(
    handlers: Handlers, active: tuple[str, Worker]
) -> None:
    server, _ = active
    # Two writers that loaded the same version: the second append is refused by the event store.
    first, second = handlers.instance(server), handlers.instance(server)
    first.request_action("stop", admin=False)
    second.request_action("pause", admin=False)
    handlers.app.save(first)
    with pytest.raises(IntegrityError):
        handlers.app.save(second)
    eventually(lambda: idle(handlers, server))
    # Through the handlers, from threads at once: exactly one is accepted, the other re-decides
    # against the new state and is refused by the guard (409), never half-applied.
    lifecycle = LifecycleHandlers(handlers)
    outcomes: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def request(action: str) -> None:
        barrier.wait()
        try:
            outcomes[action] = lifecycle.request_action(RequestAction(server, "p1", action))
        except InvalidState as e:
            outcomes[action] = e

    threads = [threading.Thread(target=request, args=(a,)) for a in ("start", "reboot_hard")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    refused = [a for a, o in outcomes.items() if isinstance(o, InvalidState)]
    assert len(outcomes) == 2 and len(refused) == 1, outcomes
    events = handlers.app.repository.event_store.get(handlers.instance(server).id)
    requested = [e.action for e in events if isinstance(e, Instance.ActionRequested)]  # type: ignore[attr-defined]
    assert requested == ["stop", next(a for a in outcomes if a not in refused)]
    inst = eventually(lambda: idle(handlers, server))
    assert (inst.vm_state, inst.power_state) == (VmState.ACTIVE, PowerState.RUNNING)


def test_a_locked_server_refuses_its_owner_but_not_an_admin(
    handlers: Handlers, active: tuple[str, Worker]
) -> None:
    server, _ = active
    lifecycle = LifecycleHandlers(handlers)
    lifecycle.lock(LockServer(server, "p1", reason="maintenance"))
    with pytest.raises(InstanceLocked) as e:
        lifecycle.request_action(RequestAction(server, "p1", "stop"))
    assert e.value.message == f"Instance {server} is locked"
    with pytest.raises(InstanceLocked):
        handlers.delete_server(DeleteServer(server, "p1"))
    inst = act(handlers, server, "stop", admin=True)
    assert inst.vm_state == VmState.STOPPED
    lifecycle.unlock(UnlockServer(server, "p1"))
    act(handlers, server, "start")
    # An admin's lock is lifted by an admin only.
    lifecycle.lock(LockServer(server, None, admin=True))
    with pytest.raises(Forbidden):
        lifecycle.unlock(UnlockServer(server, "p1"))
    lifecycle.unlock(UnlockServer(server, None, admin=True))
    handlers.delete_server(DeleteServer(server, "p1"))
    eventually(lambda: gone(handlers, server))


class BrokenPowerDriver(FlakyDriver):
    """The spawn port of libvirt, with power operations that fail as the test says."""

    def __init__(self, inner: LibvirtDriver, temporary: int = 0, permanent: bool = False) -> None:
        super().__init__(inner, failures=0)
        self.libvirt = inner
        self.temporary = temporary
        self.permanent = permanent
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.permanent:
            raise PermanentVirtError("Requested operation is not valid: domain is locked", code=55)
        if self.calls <= self.temporary:
            raise TemporaryVirtError("Timed out during operation: cannot acquire state change lock", code=68)

    def power_state(self, uuid: str) -> int:
        return self.libvirt.power_state(uuid)

    def power_on(self, uuid: str) -> int:
        self._maybe_fail()
        return self.libvirt.power_on(uuid)

    def power_off(self, uuid: str) -> int:
        self._maybe_fail()
        return self.libvirt.power_off(uuid)

    def reboot(self, uuid: str, *, hard: bool) -> int:
        self._maybe_fail()
        return self.libvirt.reboot(uuid, hard=hard)

    def pause(self, uuid: str) -> int:
        self._maybe_fail()
        return self.libvirt.pause(uuid)

    def unpause(self, uuid: str) -> int:
        self._maybe_fail()
        return self.libvirt.unpause(uuid)

    def suspend(self, uuid: str) -> int:
        self._maybe_fail()
        return self.libvirt.suspend(uuid)

    def resume(self, uuid: str) -> int:
        self._maybe_fail()
        return self.libvirt.resume(uuid)


def test_temporary_failures_are_retried_until_the_action_is_done(
    handlers: Handlers, driver: LibvirtDriver, hosted: Hosted
) -> None:
    flaky = BrokenPowerDriver(driver, temporary=2)
    server, _ = hosted(flaky)
    eventually(lambda: settled(handlers, server))
    inst = act(handlers, server, "stop")
    assert (inst.vm_state, inst.power_state, flaky.calls) == (VmState.STOPPED, PowerState.SHUTDOWN, 3)


def test_a_permanent_failure_ends_the_action_with_a_fault_in_a_clean_state(
    handlers: Handlers, driver: LibvirtDriver, hosted: Hosted
) -> None:
    server, _ = hosted(BrokenPowerDriver(driver, permanent=True))
    eventually(lambda: settled(handlers, server))
    inst = act(handlers, server, "pause")
    assert (inst.vm_state, inst.task_state, inst.power_state) == (VmState.ACTIVE, None, PowerState.RUNNING)
    assert inst.fault is not None and inst.fault["code"] == ACTION_FAILED
    assert "domain is locked" in inst.fault["message"]
    # Temporary failures that outlast the retries end the same way (FAST_RETRY: 4 attempts).
    act(handlers, server, "stop")  # still refused permanently: stays active
    assert handlers.instance(server).vm_state == VmState.ACTIVE


def test_a_guest_that_vanished_puts_the_server_in_error(
    handlers: Handlers, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    server, _ = active
    dom = conn.lookupByUUIDString(server)
    dom.destroy()
    dom.undefine()
    inst = act(handlers, server, "reboot_hard")
    assert (inst.vm_state, inst.task_state) == (VmState.ERROR, None)
    assert inst.fault is not None and "No domain" in inst.fault["message"]
    handlers.delete_server(DeleteServer(server, "p1"))  # an ERROR server can still be deleted
    eventually(lambda: gone(handlers, server))


def test_the_host_answers_console_output_over_nats(
    handlers: Handlers, bridge: NatsBridge, tmp_path: Path, active: tuple[str, Worker]
) -> None:
    server, _ = active
    log = tmp_path / "instances" / HOST / server / "console.log"
    assert log.parent.is_dir()  # the worker made it for the serial console
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "STRATUS-GUEST-READY\n")
    answer = hostrpc.ask(bridge, HOST, hostrpc.CONSOLE, {"server_id": server, "length": 2})
    assert answer == {"output": "line 99\nSTRATUS-GUEST-READY\n"}
    whole = hostrpc.ask(bridge, HOST, hostrpc.CONSOLE, {"server_id": server, "length": None})
    assert whole["output"].startswith("line 0\n") and len(whole["output"].splitlines()) == 101
    with pytest.raises(hostrpc.HostRefused) as e:
        hostrpc.ask(bridge, HOST, hostrpc.CONSOLE, {"server_id": "../../etc/passwd"})
    assert e.value.code == hostrpc.NOT_FOUND
    with pytest.raises(hostrpc.HostUnavailable):
        hostrpc.ask(bridge, "no-such-host", hostrpc.CONSOLE, {"server_id": server}, timeout=0.5)


def test_a_shelve_replayed_after_the_guest_was_removed_still_finishes(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    """The worker died between removing the guest and recording it: the redelivered shelve finds no
    guest, and finishes as if it had removed it (offloaded, the host's claim released)."""
    server, worker = active
    worker.close()  # the host's worker is down while the shelve is asked for
    LifecycleHandlers(handlers).request_action(RequestAction(server, "p1", "shelve"))
    driver.destroy(server)  # what the worker had done before it died
    assert PowerActions(handlers.bus, driver, HOST).handle("shelve", server, 2) is DONE
    inst = handlers.instance(server)
    assert (inst.vm_state, inst.task_state, inst.host) == (VmState.SHELVED_OFFLOADED, None, None)
    assert server not in handlers.host(HOST).claims
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByUUIDString(server)
